"""kdissect's command line run in the test's own process: the exit status, stdout and stderr
`python -m kdissect ARGS` gives, without starting an interpreter and importing kdissect
again (~0.15 CPU-s a run; over a second of wall time on a busy 2-core machine).

For tests whose point is what the command prints or how it exits. Tests of the process
itself keep a subprocess: start-up imports, CPU and memory measured, signals, workers,
rights, a real terminal. A bug raises here with its traceback (the entry point's --debug),
where the installed command would print one line and exit 70: such a test fails either way.
One run at a time: the run has the process's sys.stdin, stdout and stderr to itself.
"""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from kdissect.cli.entry import main


def kdissect(
    *args: str, input: str | bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """One run of ``kdissect ARGS`` (paths absolute: the working directory is the test's);
    ``env``: variables set for the run."""
    with CliRunner().isolation(input=input, env=env) as (out, err, _):
        code = 0
        try:
            main([*args, "--debug"])
        except SystemExit as e:  # as the interpreter ends: a message is printed, status 1
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        finally:
            sys.stdout.flush()  # (text written through the wrappers over the buffers)
            sys.stderr.flush()
    return subprocess.CompletedProcess(["kdissect", *args], code, out.getvalue(), err.getvalue())


def kdissect_text(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``kdissect``, its stdout and stderr decoded (UTF-8, as `text=True` reads a pipe here)."""
    run = kdissect(*args, env=env)
    return subprocess.CompletedProcess(
        run.args, run.returncode, run.stdout.decode(), run.stderr.decode()
    )
