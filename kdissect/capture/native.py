"""Which packet path runs: the compiled one (``kdissect._native``, built from native/ in
Rust when a Rust compiler is at hand at install time) or the pure-Python reference
(pcapfile.py, packet.py). Both give the same output (tests/test_native.py);
``KDISSECT_PURE=1`` forces the Python path; ``KDISSECT_PY_REASM=1`` keeps the compiled
scanner but reassembles TCP in Python (capture/tcp.py)."""

from __future__ import annotations

import os
from typing import Any

from ..protocol.native_ext import PURE_ENV, extension

PY_REASM_ENV = "KDISSECT_PY_REASM"


def scanner_class() -> Any | None:
    """The compiled Scanner class, or None when the Python path is to run."""
    ext = extension()
    return None if ext is None else ext.Scanner


def reasm_class() -> Any | None:
    """The compiled TCP reassembler (``_native.Reasm``), or None."""
    if scanner_class() is None or os.environ.get(PY_REASM_ENV, "") not in ("", "0"):
        return None
    from .. import _native  # type: ignore[attr-defined]

    return getattr(_native, "Reasm", None)


def packet_path() -> str:
    """What `kdissect --version` says about the packet path."""
    if scanner_class() is not None:
        if reasm_class() is None:
            return (
                "packet path: compiled (Rust extension kdissect._native), TCP "
                f"reassembly in Python ({PY_REASM_ENV} is set)"
            )
        return "packet path: compiled (Rust extension kdissect._native)"
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return f"packet path: pure Python ({PURE_ENV} is set)"
    return (
        "packet path: pure Python (the Rust extension was not built: install with "
        "a Rust compiler, https://rustup.rs, to get it)"
    )


def record_cipher_class() -> Any | None:
    """The compiled TLS record decryptor (``_native.RecordCipher``: AES-GCM and
    ChaCha20-Poly1305), or None: capture/tls/cipher.py's ``Decryptor`` then decrypts."""
    if scanner_class() is None:
        return None
    from .. import _native  # type: ignore[attr-defined]

    return getattr(_native, "RecordCipher", None)


def map_guard(even_pure: bool = False) -> Any | None:
    """The compiled guard of mapped files (``_native.map_guard``: native/src/mapped.rs),
    or None: capture files are then read, not mapped. ``even_pure``: the guard even with
    ``KDISSECT_PURE`` (it decodes nothing; a reader that cannot read instead of mapping
    keeps it)."""
    if not even_pure and scanner_class() is None:
        return None
    try:
        from .. import _native  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(_native, "map_guard", None)


def map_faulted(even_pure: bool = False) -> Any | None:
    """Whether a page of a guarded map vanished, by its slot (``_native.map_faulted``), or
    None without the guard."""
    if map_guard(even_pure) is None:
        return None
    from .. import _native  # type: ignore[attr-defined]

    return getattr(_native, "map_faulted", None)


def map_unguard(slot: int) -> bool:
    from .. import _native  # type: ignore[attr-defined]

    return bool(_native.map_unguard(slot))
