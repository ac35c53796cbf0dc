"""Apache Kafka itself for the tests: KRaft nodes on 127.0.0.1 free ports, started from the jars
that scripts/kafka/fetch put in the cache, stopped by PID (never left behind: atexit, a parent
death signal, and the fixtures' teardown).

    kafka = ApacheKafka(nodes=1)                      # one combined broker+controller
    kafka = ApacheKafka(nodes=3)                      # three combined nodes = a 3-voter quorum
    kafka = ApacheKafka(listeners=("PLAINTEXT", "SASL_PLAINTEXT", "SSL"), start=False)
    kafka.advertise(1, "PLAINTEXT", "127.0.0.1", relay.port)   # put a relay/proxy in front
    kafka.start()
    kafka.bootstrap("SASL_PLAINTEXT"); kafka.log_dirs; kafka.run_tool(DUMP_LOG, ...)
    kafka.stop_node(2); kafka.start_node(2); kafka.close()

The three-node cluster is three combined broker+controller nodes: a real controller quorum
(Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of __cluster_metadata between voters) and three
replicating brokers (follower Fetch, AlterPartition, BrokerHeartbeat), with three JVMs instead
of six on a shared 2-core machine. Every listener of every node (and the CONTROLLER listener)
has its own port, so a loopback capture can tell the connections apart.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import base64
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.broker import free_port

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "scripts" / "kafka" / "fetch"
VERSION = (ROOT / "scripts" / "kafka" / "VERSION").read_text().strip()
LEGACY_CLIENTS = (ROOT / "scripts" / "kafka" / "LEGACY_CLIENTS").read_text().strip()
TIERED_TEST_JAR = (ROOT / "scripts" / "kafka" / "TIERED_TEST_JAR").read_text().strip()
PREVIOUS_CLIENTS = (ROOT / "scripts" / "kafka" / "PREVIOUS_CLIENTS").read_text().strip()
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"  # in kafka-tools-<version>.jar

USERS = {"alice": "alice-secret", "admin": "admin-secret"}  # PLAIN and SCRAM-SHA-256/512
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")  # listener names = protocols
# Small JVMs: C1 only and a serial collector start faster and stay small on a busy machine.
JVM = [
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-XX:MaxMetaspaceSize=160m",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
]
TOOL_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]

_live: set[subprocess.Popen] = set()
_live_lock = threading.Lock()


def _kill_all() -> None:
    with _live_lock:
        procs = list(_live)
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


atexit.register(_kill_all)


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: the JVM gets SIGKILL if the test process dies without cleaning up.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


_libs_dir: Path | None = None


def libs() -> Path:
    """The cached jars of the pinned release (fetched by scripts/kafka/fetch on first use)."""
    global _libs_dir
    if _libs_dir is None:
        out = subprocess.run([str(FETCH)], check=True, capture_output=True, text=True)
        _libs_dir = Path(out.stdout.strip().splitlines()[-1])
    return _libs_dir


def classpath() -> str:
    return str(libs() / "*")


def tiered_storage_jars() -> tuple[Path, ...]:
    """kafka-storage's test jar (LocalTieredStorage), fetched beside the release's jars (from
    the release scripts/kafka/TIERED_TEST_JAR names: not every release publishes it), and the
    class of that release it needs that the pinned one moved (LogContext: scripts/kafka/fetch)."""
    tiered = libs().parent / "tiered"
    compat = tiered / f"logcontext-{TIERED_TEST_JAR}.jar"
    return (
        tiered / f"kafka-storage-{TIERED_TEST_JAR}-test.jar",
        *((compat,) if TIERED_TEST_JAR != VERSION else ()),
    )


def legacy_clients_jar() -> Path:
    """kafka-clients of the last 3.x line: it still defines the versions Kafka 4.0 removed."""
    return (
        libs().parents[1]
        / f"kafka-clients-{LEGACY_CLIENTS}"
        / f"kafka-clients-{LEGACY_CLIENTS}.jar"
    )


def previous_clients_classpath() -> str:
    """The pinned release's jars with its kafka-clients replaced by the previous line's
    (scripts/kafka/PREVIOUS_CLIENTS): a client of the last release against today's broker."""
    jar = (
        libs().parents[1]
        / f"kafka-clients-{PREVIOUS_CLIENTS}"
        / f"kafka-clients-{PREVIOUS_CLIENTS}.jar"
    )
    others = [
        str(j) for j in sorted(libs().glob("*.jar")) if j.name != f"kafka-clients-{VERSION}.jar"
    ]
    return os.pathsep.join([str(jar), *others])


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def run_tool(
    main_class: str, *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess:
    """Run one of Kafka's JVM tools (e.g. DUMP_LOG) on the fetched classpath."""
    return subprocess.run(
        [
            java(),
            *TOOL_JVM,
            "-cp",
            classpath(),
            "-Dlog4j2.configurationFile=" + str(_quiet_log4j()),
            main_class,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


def _quiet_log4j() -> Path:
    path = libs().parent / "log4j2-tools.properties"
    if not path.exists():
        path.write_text(
            "rootLogger.level = error\nrootLogger.appenderRef.err.ref = err\n"
            "appender.err.type = Console\nappender.err.name = err\n"
            "appender.err.target = SYSTEM_ERR\n"
            "appender.err.layout.type = PatternLayout\n"
            "appender.err.layout.pattern = %m%n\n"
        )
    return path


@dataclass
class Tls:
    """A CA and a server certificate for 127.0.0.1/localhost, as PEM files."""

    ca: Path  # clients trust this (Python: cafile; Java: truststore type PEM)
    server: Path  # key + certificate chain, the broker's PEM keystore

    @classmethod
    def make(cls, directory: Path) -> Tls:
        directory.mkdir(parents=True, exist_ok=True)
        ca_key, ca, key, csr, cert = (
            directory / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
        )
        run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
        run(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "3",
            "-subj",
            "/CN=kdissect test CA",
            "-keyout",
            str(ca_key),
            "-out",
            str(ca),
        )
        run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(key),
            "-out",
            str(csr),
        )
        ext = directory / "san.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        run(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(ca),
            "-CAkey",
            str(ca_key),
            "-CAcreateserial",
            "-days",
            "3",
            "-extfile",
            str(ext),
            "-out",
            str(cert),
        )
        pkcs8 = directory / "server.pk8"
        run("pkcs8", "-topk8", "-nocrypt", "-in", str(key), "-out", str(pkcs8))
        bundle = directory / "server-keystore.pem"
        bundle.write_text(pkcs8.read_text() + cert.read_text() + ca.read_text())
        return cls(ca=ca, server=bundle)


@dataclass
class Node:
    node_id: int
    directory: Path
    ports: dict[str, int]  # listener name -> port (CONTROLLER included)
    advertised: dict[str, tuple[str, int]] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    started_s: float = 0.0  # wall time of the last start

    @property
    def log_dir(self) -> Path:
        return self.directory / "data"

    @property
    def server_log(self) -> Path:
        return self.directory / "server.log"

    def rss_kib(self) -> int:
        """Resident memory of the node's JVM, from /proc (0 when not running)."""
        if self.proc is None or self.proc.poll() is not None:
            return 0
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


class ApacheKafka:
    def __init__(
        self,
        nodes: int = 1,
        listeners: tuple[str, ...] = ("PLAINTEXT",),
        start: bool = True,
        extra: dict[str, str] | None = None,
        directory: Path | None = None,
        jars: tuple[Path, ...] = (),
    ):
        """``jars``: more jars on the nodes' classpath (a RemoteStorageManager...)."""
        self.jars = jars
        if "PLAINTEXT" not in listeners:
            listeners = ("PLAINTEXT", *listeners)
        self.listeners = listeners
        # Brokers replicate over INTERNAL and reach the controllers over CONTROLLER (both
        # plaintext): a capture of the client listeners holds client traffic only.
        internal = ("INTERNAL", "CONTROLLER")
        self.extra = extra or {}
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._own_dir = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="kdissect-kafka-"))
        self.tls = Tls.make(self.directory / "tls") if "SSL" in listeners else None
        self.nodes = [
            Node(
                i,
                self.directory / f"node{i}",
                {name: free_port() for name in (*listeners, *internal)},
            )
            for i in range(1, nodes + 1)
        ]
        self.formatted = False
        if start:
            self.start()

    # -- addresses ---------------------------------------------------------------------
    def advertise(self, node_id: int, listener: str, host: str, port: int) -> None:
        """Advertise another address (a relay, the kdissect proxy) for one node's listener;
        call before start()."""
        self.node(node_id).advertised[listener] = (host, port)

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        """The nodes' own addresses (not the advertised ones) for that listener."""
        return ",".join(f"127.0.0.1:{n.ports[listener]}" for n in self.nodes)

    def ports(self, *listeners: str) -> list[int]:
        """The ports of these listeners (all by default) on every node: what a loopback
        capture filters on (INTERNAL + CONTROLLER: the traffic between nodes)."""
        return [
            p
            for n in self.nodes
            for name, p in n.ports.items()
            if not listeners or name in listeners
        ]

    @property
    def log_dirs(self) -> list[Path]:
        return [n.log_dir for n in self.nodes]

    @property
    def classpath(self) -> str:
        return classpath()

    run_tool = staticmethod(run_tool)

    # -- configuration -----------------------------------------------------------------
    def _properties(self, node: Node) -> str:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.ports['CONTROLLER']}" for n in self.nodes)
        rf = str(min(3, len(self.nodes)))
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in node.ports.items())
        advertised = ",".join(
            f"{name}://{':'.join(map(str, node.advertised.get(name, ('127.0.0.1', port))))}"
            for name, port in node.ports.items()
            if name != "CONTROLLER"
        )
        # other names (CONTROLLER, INTERNAL, RELAYED: a listener a relay advertises) are plaintext
        protocols = ",".join(
            f"{name}:{name if name in SECURITY else 'PLAINTEXT'}" for name in node.ports
        )
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listeners": listeners,
            "advertised.listeners": advertised,
            "listener.security.protocol.map": protocols,
            "log.dirs": str(node.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1" if rf == "1" else "2",
            "transaction.state.log.num.partitions": "3",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1" if rf == "1" else "2",
            "share.coordinator.state.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "2",
            "log.cleaner.enable": "false",
            # ACLs work (CreateAcls...), but resources without ACLs stay open to everyone
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "super.users": "User:admin;User:ANONYMOUS",
        }
        if len(self.nodes) > 1:
            # a killed broker is fenced, and its partitions led elsewhere, within 3 s
            props.update(
                {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}
            )
        if "SASL_PLAINTEXT" in node.ports:
            plain_users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
            props["sasl.enabled.mechanisms"] = ",".join(("PLAIN", *SCRAM))
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            )
            for mech in SCRAM:
                props[f"listener.name.sasl_plaintext.{mech.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        if self.tls is not None:
            props.update(
                {
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": str(self.tls.server),
                    "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": str(self.tls.ca),
                    "ssl.client.auth": "none",
                }
            )
        props.update(self.extra)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _write_config(self, node: Node) -> Path:
        node.directory.mkdir(parents=True, exist_ok=True)
        config = node.directory / "server.properties"
        config.write_text(self._properties(node))
        (node.directory / "log4j2.properties").write_text(
            "rootLogger.level = warn\nrootLogger.appenderRef.file.ref = file\n"
            "appender.file.type = File\nappender.file.name = file\n"
            f"appender.file.fileName = {node.server_log}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            # the start-up line the readiness check waits for
            "logger.raft.name = kafka.server.KafkaRaftServer\nlogger.raft.level = info\n"
        )
        return config

    def _format(self) -> None:
        scram = []
        if "SASL_PLAINTEXT" in self.listeners:  # SCRAM users exist from the start
            scram = [
                a
                for mech in SCRAM
                for user, password in USERS.items()
                for a in ("--add-scram", f"{mech}=[name={user},password={password}]")
            ]
        # one JVM per node, in parallel: the format tool takes seconds to start
        threads = [
            threading.Thread(
                target=run_tool,
                args=(
                    "kafka.tools.StorageTool",
                    "format",
                    f"--cluster-id={self.cluster_id}",
                    "-c",
                    str(self._write_config(node)),
                    "--ignore-formatted",
                    *scram,
                ),
            )
            for node in self.nodes
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        missing = [n.node_id for n in self.nodes if not (n.log_dir / "meta.properties").exists()]
        if missing:
            raise RuntimeError(f"kafka-storage format failed for nodes {missing}")
        self.formatted = True

    # -- life cycle ----------------------------------------------------------------------
    def start(self, timeout: float = 90) -> None:
        """Format (once) and start every node; returns when all brokers are started."""
        if not self.formatted:
            self._format()
        for node in self.nodes:
            self._spawn(node)
        self._wait(self.nodes, timeout)

    def start_node(self, node_id: int, timeout: float = 90) -> None:
        node = self.node(node_id)
        self._spawn(node)
        self._wait([node], timeout)

    def stop_node(self, node_id: int, kill: bool = False) -> None:
        """Stop one node: SIGTERM (a controlled shutdown) or, with kill, SIGKILL (a crash)."""
        self._stop(self.node(node_id), kill)

    def close(self) -> None:
        # SIGKILL, all at once: the data is thrown away, and a controlled shutdown of the
        # last voters waits for a quorum that is already gone (30 s for three nodes)
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
        for node in self.nodes:
            self._stop(node, kill=True)
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ApacheKafka:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _spawn(self, node: Node) -> None:
        if node.proc is not None and node.proc.poll() is None:
            return
        config = self._write_config(node)  # advertised addresses may have changed
        node.server_log.unlink(missing_ok=True)
        node.started_s = time.monotonic()
        stdout = open(node.directory / "stdout.log", "ab")
        node.proc = subprocess.Popen(
            [
                java(),
                *JVM,
                f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
                "-cp",
                os.pathsep.join([classpath(), *map(str, self.jars)]),
                "kafka.Kafka",
                str(config),
            ],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        stdout.close()
        with _live_lock:
            _live.add(node.proc)

    def _wait(self, nodes: list[Node], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = list(nodes)
        while pending:
            for node in list(pending):
                if node.proc.poll() is not None:
                    self.close()
                    raise RuntimeError(
                        f"Apache Kafka node {node.node_id} exited:\n"
                        + _tail(node.directory / "stdout.log")
                        + _tail(node.server_log)
                    )
                if node.server_log.exists() and "Kafka Server started" in node.server_log.read_text(
                    errors="replace"
                ):
                    node.started_s = time.monotonic() - node.started_s
                    pending.remove(node)
            if pending and time.monotonic() > deadline:
                self.close()
                raise RuntimeError(
                    f"Apache Kafka did not start in {timeout:.0f} s:\n"
                    + _tail(pending[0].server_log)
                )
            time.sleep(0.1)

    def _stop(self, node: Node, kill: bool) -> None:
        proc = node.proc
        if proc is None:
            return
        if proc.poll() is None:
            if kill:
                proc.kill()
            else:
                proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        with _live_lock:
            _live.discard(proc)
        node.proc = None


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
    except OSError:
        return ""
