"""A real Spark standalone cluster on loopback: a master and workers as separate JVMs
(pyspark's own install: spark-class ...deploy.master.Master / deploy.worker.Worker), for
the cluster test and benchmarks/spark_speed.py. Stopped by PID when the block ends."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.broker import free_port


@dataclass
class Cluster:
    url: str
    master: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)
    env: dict = field(default_factory=dict)  # what kdissect spark should run with


@contextlib.contextmanager
def standalone(
    work: Path, workers: int = 2, cores: int = 1, memory: str = "1g", pythonpath: str | None = None
) -> Iterator[Cluster]:
    port = free_port()
    spark_class = os.path.join(os.path.dirname(sys.executable), "spark-class")
    import pyspark

    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_LOG_DIR": str(work),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_HOME": os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__),
    }
    if pythonpath:  # the executors' Python workers import kdissect from it
        env["PYTHONPATH"] = pythonpath
    logs = [work / "master.log"] + [work / f"worker{n}.log" for n in range(workers)]
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(logs[0], "wb"),
        env=env,
    )
    cluster = Cluster(f"spark://127.0.0.1:{port}", master, env=env)
    try:
        for n in range(workers):
            cluster.workers.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        cluster.url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        str(cores),
                        "--memory",
                        memory,
                        "--webui-port",
                        "0",
                        "--work-dir",
                        str(work / f"worker{n}"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=open(logs[n + 1], "wb"),
                    env=env,
                )
            )
        # ready when the master leads and every worker has registered (a client or a
        # worker started before the master listens is refused)
        deadline = time.monotonic() + 300
        while "elected leader" not in logs[0].read_text(errors="replace") or not all(
            "Successfully registered with master" in log.read_text(errors="replace")
            for log in logs[1:]
        ):
            if time.monotonic() > deadline or any(
                p.poll() is not None for p in [master, *cluster.workers]
            ):
                raise RuntimeError(
                    "the Spark standalone cluster did not start: "
                    + " | ".join(log.read_text(errors="replace")[-400:] for log in logs)
                )
            time.sleep(0.5)
        yield cluster
    finally:
        for p in [*cluster.workers, master]:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def processes_under(pid: int) -> list[int]:
    """Every process under ``pid`` (children, theirs...)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    kids: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = map(int, line.split())
        kids.setdefault(pp, []).append(p)
    found, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def runs_python(pid: int) -> bool:
    """Whether a PySpark worker runs under ``pid`` (an executor running a task)."""
    for c in processes_under(pid):
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes()
            if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd:
                return True
        except OSError:
            pass
    return False
