"""Starting Spark for kdissect, and saying in one line what went wrong when it fails."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


class SparkStartError(Exception):
    pass


def _configured_master() -> str | None:
    """A master the user set outside kdissect: MASTER, PYSPARK_SUBMIT_ARGS, or
    spark-defaults.conf."""
    if os.environ.get("MASTER"):
        return os.environ["MASTER"]
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if "--master" in args[:-1]:
        return args[args.index("--master") + 1]
    for conf_dir in (
        os.environ.get("SPARK_CONF_DIR"),
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None,
    ):
        conf = Path(conf_dir, "spark-defaults.conf") if conf_dir else None
        if conf is not None and conf.is_file():
            for line in conf.read_text().splitlines():
                parts = line.split(None, 1)
                if len(parts) == 2 and parts[0] == "spark.master":
                    return parts[1].strip()
    return None


def chosen_master(master: str | None = None) -> str:
    """Where the job will run: ``master``, else SPARK_REMOTE, else a configured master,
    else embedded ``local[*]``."""
    if master:
        return master
    return os.environ.get("SPARK_REMOTE") or _configured_master() or "local[*]"


def check_java() -> None:
    """Spark needs Java 17+: say so plainly instead of letting the JVM launch fail."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no `java` on PATH"
        raise SparkStartError(
            f"Java was not found ({where}); Spark needs Java 17 or newer: "
            f"install it (e.g. apt install openjdk-17-jre-headless) or "
            f"set JAVA_HOME"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SparkStartError(f"{java} does not run ({e}); Spark needs Java 17 or newer") from None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if found:
        major = int(found.group(2)) if found.group(1) == "1" else int(found.group(1))
        if major < 17:
            raise SparkStartError(
                f"{java} is Java {major}; Spark needs Java 17 or newer (set JAVA_HOME to one)"
            )


def get_session(master: str | None = None, app_name: str = "kdissect", log: str | None = None):
    """A Spark session: ``master`` if given, else one the user configured, else embedded
    ``local[*]``. ``sc://...`` (or SPARK_REMOTE) means Spark Connect. Executors run the
    Python that runs kdissect; a local Spark binds to 127.0.0.1 and keeps its UI and
    console progress quiet. With ``log``, the JVM's own output goes to that file."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    remote = (
        master
        if master and master.startswith("sc://")
        else None
        if master
        else os.environ.get("SPARK_REMOTE")
    )
    if remote:
        # a server's settings are its own; "local[N]" remotes start one here
        if remote.startswith("local"):
            check_java()
        with _jvm_output_to(log if remote.startswith("local") else None):
            return builder.remote(remote).getOrCreate()
    check_java()
    configured = _configured_master()
    chosen = master or configured or "local[*]"
    if master or configured is None:  # else Spark's own configuration names it
        builder = builder.master(chosen)
    if chosen.startswith("local"):
        builder = (
            builder.config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2))))
        )
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.pyspark.udf.faulthandler.enabled", "true")
    )
    with _jvm_output_to(log):
        spark = builder.getOrCreate()
    sc = context(spark)
    if sc is not None:
        sc.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def _jvm_output_to(log: str | None):
    """Send what the Spark JVM prints at start-up and later (log4j banners, JVM
    warnings) to ``log`` instead of the user's terminal; on failure, raise with the
    lines that say why."""
    if log is None:
        yield
        return
    saved = os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    except Exception as e:
        os.dup2(saved, 2)
        reasons = [
            line.strip()
            for line in Path(log).read_text(errors="replace").splitlines()
            if ("Exception" in line or "Error" in line or "rror:" in line)
            and not line.lstrip().startswith("at ")
        ]
        raise SparkStartError("; ".join(dict.fromkeys(reasons[-3:])) or explain(e)) from e
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def context(spark):
    """The SparkContext of a classic session; None over Spark Connect."""
    try:
        return spark.sparkContext
    except Exception:  # Connect has none
        return None


def parallelism(spark) -> int:
    """How many tasks the session runs at once (over Connect: asked of the server)."""
    sc = context(spark)
    try:
        if sc is not None:
            return sc.defaultParallelism
        from pyspark.sql import functions as F

        # spark.range spreads over the default parallelism when not told otherwise
        return spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).distinct().count()
    except Exception:
        return 1


MEMORY_ADVICE = (
    "a task ran out of memory decoding one file or connection: split large "
    "files (--split, --shard-size) or give each Python worker more memory "
    "(spark.executor.pyspark.memory, spark.executor.memory), or lower "
    "--max-memory"
)
# what running out of memory looks like in a worker's traceback: a MemoryError, or a
# library that could not be mapped (Spark's RLIMIT_AS from spark.executor.pyspark.memory)
_NO_MEMORY = re.compile(
    r"^(?:\w+\.)*(?:Task)?MemoryError\b|failed to map segment from "
    r"shared object|Cannot allocate memory",
    re.M,
)
_WORKER_DIED = re.compile(
    r"EOFException|Python worker exited unexpectedly|"
    r"Connection reset|killed by the OS"
)


def explain(e: BaseException) -> str:
    """One line that says what went wrong in a Spark call: the Python exception raised
    in a worker (not Spark's "An exception was thrown from the Python worker"), the
    Java exception's own message (not "An error occurred while calling o387.parquet"),
    or the first line of anything else."""
    text = str(e).strip()
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            text = java.toString()
            cause = java.getCause()
            while cause is not None:  # the innermost cause says what happened
                text = cause.toString()
                cause = cause.getCause()
        except Exception:
            pass
    if "Traceback (most recent call last)" in text:
        if _NO_MEMORY.search(text):
            return f"in a Python worker: out of memory: {MEMORY_ADVICE}"
        tail = text.split("Traceback (most recent call last)")[-1]
        lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
        # the exception line is the last one that is not a frame or source line
        raised = [
            ln
            for ln in lines
            if re.match(
                r"^[A-Za-z_][\w.]*(Error|Exception|Exit|"
                r"Interrupt|Warning)\b",
                ln,
            )
        ]
        if raised:
            return f"in a Python worker: {raised[-1]}"
    elif (died := _WORKER_DIED.search(text)) is not None:
        # the worker died without a word (killed over its memory limit, or out of memory
        # where Python could not even raise): Spark says only that its stream ended
        return (
            f"a Python worker died without saying why (Spark: "
            f"{died.group(0)}); when a task reads a large file "
            f"that is usually its memory limit. If so, {MEMORY_ADVICE}"
        )
    text = re.sub(r"^\[[A-Z_.]+\]\s*", "", text)  # Spark's [ERROR_CLASS] prefix
    text = re.sub(r"^(?:[a-z]\w*\.)+(\w+(?:Exception|Error))", r"\1", text)  # short class
    first = text.splitlines()[0] if text else type(e).__name__
    return first.strip()
