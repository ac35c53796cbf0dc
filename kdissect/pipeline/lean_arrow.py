"""pyarrow without numpy for ``kdissect pcap --format parquet``.

pyarrow (16 and later) imports numpy when it can, and takes it only for conversions the
one-process Parquet path never makes (rows go through Arrow's JSON reader, times are
viewed, not cast: pipeline/tables.py). Importing numpy is 0.12 CPU-s and some 30 MiB of
a run that takes about one CPU-s for 150 MB; so before anything imports pyarrow, this
imports it with numpy hidden. Nothing else is changed: numpy stays importable (pandas,
Spark), only pyarrow's own numpy conversions are off in this process.
"""

from __future__ import annotations

import sys


def import_pyarrow_lean() -> None:
    """Import pyarrow without numpy unless either is already imported; an ImportError
    (pyarrow missing) is left to the caller's own import, which says what to install."""
    if "pyarrow" in sys.modules or "numpy" in sys.modules:
        return
    sys.modules["numpy"] = None          # type: ignore[assignment]  # import numpy fails
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    finally:
        if sys.modules.get("numpy", 0) is None:
            del sys.modules["numpy"]
