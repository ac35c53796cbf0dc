"""Where captures and tables live: local paths, and URLs (``file://``, ``s3://`` and
``s3a://``, ``hdfs://``, ``gs://``...) opened through fsspec, so that the driver and
the executors read the same bytes wherever the cluster keeps them.

Credentials and endpoints come from each filesystem's usual settings (for S3: the AWS
environment variables or config files, e.g. ``AWS_ENDPOINT_URL`` for an S3-compatible
server)."""

from __future__ import annotations

import os
import posixpath
from typing import BinaryIO

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".gz")
# what an executor reads at a time from a remote file (pcap records are small)
_BLOCK = 8 * 1024 * 1024


class StorageError(Exception):
    pass


def is_url(path: str) -> bool:
    return "://" in path


def _fs(url: str):
    try:
        import fsspec

        return fsspec.core.url_to_fs(url)
    except ImportError as e:  # the filesystem's package (s3fs, gcsfs...) is missing
        raise StorageError(f"{url}: {e}") from None
    except ValueError as e:  # an unknown protocol
        raise StorageError(f"{url}: {e}") from None


def filesystem(url: str):
    """(fsspec filesystem, path within it) of a URL."""
    return _fs(url)


def _url(scheme: str, path: str) -> str:
    """A path found by fsspec as a URL in the scheme the user gave (s3a stays s3a)."""
    return f"{scheme}://{path}" if scheme not in ("file", "local") else f"file://{path}"


def absolute(path: str) -> str:
    """A local path made absolute here, on the client (a Spark Connect server or an
    executor would otherwise resolve it against its own working directory)."""
    return path if is_url(path) else os.path.abspath(path)


def exists(path: str) -> bool:
    if not is_url(path):
        return os.path.exists(path)
    fs, p = _fs(path)
    return fs.exists(p)


def expand(inputs: list[str]) -> list[str]:
    """Files, and the capture files inside directories (recursively), sorted, each
    once. Raises StorageError for an input that does not exist."""
    out = []
    for item in inputs:
        if not is_url(item):
            if os.path.isdir(item):
                out += sorted(
                    os.path.join(d, f)
                    for d, _, files in os.walk(item)
                    for f in files
                    if f.lower().endswith(CAPTURE_SUFFIXES)
                )
            elif os.path.exists(item):
                out.append(item)
            else:
                raise StorageError(f"{item}: no such file or directory")
            continue
        fs, p = _fs(item)
        try:
            if fs.isdir(p):
                scheme = item.split("://", 1)[0]
                out += sorted(
                    _url(scheme, f) for f in fs.find(p) if f.lower().endswith(CAPTURE_SUFFIXES)
                )
            elif fs.exists(p):
                out.append(item)
            else:
                raise StorageError(f"{item}: no such file or directory")
        except (OSError, PermissionError) as e:
            raise StorageError(f"{item}: {e}") from None
    return list(dict.fromkeys(out))  # a file named twice is read once


def size(path: str) -> int:
    if not is_url(path):
        return os.path.getsize(path)
    fs, p = _fs(path)
    return fs.size(p)


def open_input(path: str) -> BinaryIO:
    """The capture at ``path`` for reading (seekable)."""
    if not is_url(path) or path.startswith("file://"):
        return open(path[len("file://") :] if is_url(path) else path, "rb")
    fs, p = _fs(path)
    return fs.open(p, "rb", block_size=_BLOCK, cache_type="readahead")


def child(path: str, name: str) -> str:
    return posixpath.join(path, name) if is_url(path) else os.path.join(path, name)


def listing(path: str) -> list[str] | None:
    """Names inside the directory ``path``; [] if it does not exist; None if it is a
    file."""
    if not is_url(path):
        if not os.path.exists(path):
            return []
        return os.listdir(path) if os.path.isdir(path) else None
    fs, p = _fs(path)
    if not fs.exists(p):
        return []
    if not fs.isdir(p):
        return None
    return [posixpath.basename(f.rstrip("/")) for f in fs.ls(p, detail=False)]


def remove_tree(path: str) -> None:
    if not is_url(path):
        import shutil

        shutil.rmtree(path)
        return
    fs, p = _fs(path)
    fs.rm(p, recursive=True)


def move_files(src: str, dst: str) -> None:
    """Move the files of the directory tree ``src`` into ``dst`` at the same relative
    paths (beside what ``dst`` holds), leaving out writers' markers (``_SUCCESS``,
    ``.crc`` files): a run's new Parquet files join a table."""
    if not is_url(src):
        for d, _, files in os.walk(src):
            rel = os.path.relpath(d, src)
            for name in files:
                if name.startswith(("_", ".")):
                    continue
                target = os.path.normpath(os.path.join(dst, rel))
                os.makedirs(target, exist_ok=True)
                os.replace(os.path.join(d, name), os.path.join(target, name))
        return
    fs, s = _fs(src)
    _, t = _fs(dst)
    for f in fs.find(s):
        rel = posixpath.relpath(f, s)
        if posixpath.basename(rel).startswith(("_", ".")):
            continue
        fs.mv(f, posixpath.join(t, rel))
