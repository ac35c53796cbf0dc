"""The last resort around every command: no Python traceback reaches the user.

kdissect is fed untrusted bytes by design; if one still finds a bug, the user gets one
line saying so, with where in the input it happened (read from the failing call's
frames), and exit status 70 (EX_SOFTWARE). `--debug` (anywhere on the command line, or
KDISSECT_DEBUG=1) shows the traceback instead. The entry point that wraps the CLI in it
is ``cli/entry.py`` (this module imports nothing of the CLI).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

EXIT_BUG = 70
EXIT_INTERRUPTED = 130


def guard(run: Callable[[], object], debug: bool) -> None:
    """Run ``run`` (a command) with the last-resort handling: exit statuses for an
    interrupt and a closed pipe, one line for a bug (``debug``: the traceback)."""
    try:
        run()
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(0)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - this is the last resort
        if debug:
            raise
        sys.stderr.write(describe(e) + "\n")
        sys.exit(EXIT_BUG)


def describe(e: BaseException) -> str:
    """One line: what failed, where in the input, and what to do."""
    where = _where(e.__traceback__)
    kind = (
        "ran out of memory"
        if isinstance(e, MemoryError)
        else f"internal error ({type(e).__name__}: {_first_line(e)})"
    )
    return (
        f"kdissect: {kind}{' ' + where if where else ''}. This is a bug, please report "
        f"it with the command line and the input; --debug shows the traceback."
    )


def _where(tb) -> str:
    """'in FILE near byte N, frame K' from the objects the failing frames held."""
    from .capture.pcapfile import CaptureReader, Packet

    path = offset = frame = None
    try:
        while tb is not None:
            for name, value in tb.tb_frame.f_locals.items():
                if isinstance(value, CaptureReader):
                    path, offset = value.path, value.bytes_read
                elif isinstance(value, Packet):
                    frame = value.index
                elif name == "row" and type(value) is tuple and len(value) == 11:
                    frame = value[0]  # a segment of the compiled scanner
            tb = tb.tb_next
    except Exception:  # noqa: BLE001 - never fail while reporting a failure
        pass
    parts = []
    if path is not None:
        parts.append(f"in {path} near byte {offset}")
    if frame is not None:
        parts.append(f"frame {frame}")
    return ", ".join(parts)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else "no message"


def quiet_stdout() -> None:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass
