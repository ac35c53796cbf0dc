"""pcap and pcapng files -> packets, read incrementally (also gzip-compressed).

A damaged file yields every packet before the damage and then stops, with ``Reader.
warnings`` saying where and why; only a file that is not a capture at all raises
``CaptureError``.
"""

from __future__ import annotations

import gzip
import io
import mmap
import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..protocol.times import LAST_SECOND
from .native import map_guard, map_unguard, scanner_class

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
MAX_PACKET = 256 * 1024 * 1024  # a record claiming more than this is damage
LARGEST_SANE = 262144  # tcpdump's default snaplen; larger only if the file says so


def largest_record(snaplen: int) -> int:
    """The most bytes a record of a pcap file whose header says ``snaplen`` holds."""
    return max(snaplen, LARGEST_SANE)


# bytes each pcapng block type needs after its 8-byte head (before the trailing length):
# interface description, obsolete packet, simple packet, enhanced packet, decryption secrets
_FIXED_PART = {1: 8, 2: 20, 3: 4, 6: 20, 10: 8}
SECRETS_TLS_KEY_LOG = 0x544C534B  # Decryption Secrets Block holding an NSS key log


class CaptureError(Exception):
    pass


# files people give for a capture, by their first bytes: what to do instead
_OTHER_FILES = (
    (b"\xfd7zXZ\x00", "an xz-compressed file: xz -dc FILE | kdissect pcap -"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file: zstd -dc FILE | kdissect pcap -"),
    (b"BZh", "a bzip2-compressed file: bzip2 -dc FILE | kdissect pcap -"),
    (b"PK\x03\x04", "a zip archive: unzip it and give the capture inside"),
)
_KEY_LOG_LABELS = (b"CLIENT_RANDOM ", b"_TRAFFIC_SECRET_0 ", b"EXPORTER_SECRET ")


def not_a_capture(path: str, head: bytes) -> str:
    """What to say of a file that starts with ``head`` and is no capture (the start of
    the message after its path)."""
    text = (
        f"not a pcap or pcapng file (starts with {head[:4].hex(' ')}); kdissect reads "
        f"pcap, pcapng and their gzip-compressed forms"
    )
    if path != "-":
        try:
            with open(path, "rb") as f:
                head = f.read(4096)
        except OSError:
            pass
    for magic, what in _OTHER_FILES:
        if head.startswith(magic):
            return f"{text}; this is {what}"
    if any(label in head for label in _KEY_LOG_LABELS):
        return f"{text}; this is a TLS key log: give it with --keylog beside the capture"
    return text


@dataclass(slots=True)
class Packet:
    index: int  # 1-based, as Wireshark numbers frames
    ts: float  # seconds since the epoch, UTC
    linktype: int
    data: bytes
    orig_len: int  # length on the wire (> len(data) when the snaplen cut it)


# A capture's packets may be out of time order (several capture queues, merged files):
# they are read in time order within WINDOW packets, so that a message's time is that of
# the first copy of its bytes and a connection's SYN comes before its data. Frames keep
# their numbers. The compiled scanner (native/src/lib.rs) follows the same rule.
WINDOW = 16


def in_time_order(packets: Iterator[Packet], window: int = WINDOW) -> Iterator[Packet]:
    """``packets`` in timestamp order, each put before the earlier-read packets that are
    later in time; at most ``window`` packets are put before any one (a clock stepped
    back delays no packet for more than ``window`` packets), equal times keep their order."""
    held: list[list] = []  # [packet, how many were put before it]
    for p in packets:
        at = len(held)
        while at and held[at - 1][0].ts > p.ts and held[at - 1][1] < window:
            at -= 1
        for w in held[at:]:
            w[1] += 1
        held.insert(at, [p, 0])
        if len(held) > window:
            yield held.pop(0)[0]
    for p, _ in held:
        yield p


class CaptureReader:
    def __init__(self, path: str, raw: BinaryIO | None = None):
        """``raw``: the file already opened (e.g. remote storage), named ``path``."""
        self.path = path
        self.warnings: list[str] = []
        self.format = "?"
        raw = raw if raw is not None else open(path, "rb")
        head = raw.read(2)
        raw.seek(0)
        self._file: BinaryIO = gzip.open(raw) if head == b"\x1f\x8b" else raw  # type: ignore[assignment]
        self.compressed = head == b"\x1f\x8b"
        self._broken = False  # the compressed stream broke off: nothing more
        self.bytes_read = 0
        # pcapng Decryption Secrets Blocks (TLS key logs) go here as they are read
        self.on_secrets: Callable[[bytes], None] = lambda key_log: None
        self.scanned: Any = None  # the compiled Scanner, once ``items`` runs it
        self.reasm: Any = None  # a compiled ``Reasm`` the Scanner hands segments to

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self, n: int) -> bytes:
        data = self._read_raw(n)
        self.bytes_read += len(data)
        return data

    def _read_raw(self, n: int) -> bytes:
        """Up to ``n`` bytes; fewer only at the end. A compressed stream that breaks off
        gives what it held before the break (read piecemeal: one big read would lose it)."""
        if self._broken:
            return b""
        if not self.compressed:
            return self._file.read(n)
        parts, got = [], 0
        try:
            while got < n:
                chunk = self._file.read1(n - got)  # type: ignore[attr-defined]
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
        except (OSError, EOFError, zlib.error) as e:  # gzip: truncated or corrupt stream
            self.warnings.append(f"compressed data ends early or is corrupt: {e}")
            self._broken = True
        return b"".join(parts)

    def items(self) -> Iterator[Packet | list[tuple]]:
        """What the packet path makes of the file: Packets (pure Python) or, with the
        compiled extension, batches of the TCP segments and secrets it found
        (``native.Scanner`` rows). ``native_packets``/``unsupported`` count its packets."""
        scanner = scanner_class()
        if scanner is None or self.scanned is not None:
            yield from self.packets()
            return
        yield from self._scan(scanner())

    def _scan(self, scanner) -> Iterator[list[tuple]]:
        self.scanned = scanner
        if self.reasm is not None:
            scanner.attach(self.reasm)
        # a compressed stream that breaks off says so when the read reaches the break:
        # read it as the Python path does so the warning falls where it would
        exact = self.compressed
        # a plain file is mapped (no copy of it at all), else read into one block,
        # reused (a fresh object per read is fresh pages, faulted in and cleared each
        # time); the scanner parses either in place
        readinto = None if exact else getattr(self._file, "readinto", None)
        size = min(_BLOCK, _SCAN_BLOCK)  # (tests make _BLOCK small)
        block = memoryview(bytearray(size if readinto is not None else 0))
        mapped = _Mapped.of(self._file) if readinto is not None else None
        if mapped is not None:
            scanner.guard = mapped.slot  # a page of it that vanishes stops the scan
        seen = 0  # the scanner's warnings already taken
        try:
            while not scanner.done:
                data: Any = mapped.next(size) if mapped is not None else None
                if data is not None:
                    want = len(data)  # never the end: that is read, not mapped
                    self.bytes_read += want
                elif readinto is not None:
                    if mapped is not None:  # stopped: read on from where it stopped
                        mapped = None
                        scanner.guard = -1
                    want = size
                    got = readinto(block) or 0
                    self.bytes_read += got
                    data = block[:got]
                else:
                    want = scanner.want if exact else _BLOCK
                    data = self._read(want)
                try:
                    rows = scanner.feed(data, len(data) < want)  # short only at the end
                except ValueError as e:
                    if str(e).startswith("not a pcap or pcapng file"):
                        e = ValueError(not_a_capture(self.path, bytes(data[:4])))
                    raise CaptureError(f"{self.path}: {e}") from None
                finally:
                    self.format = scanner.format
                said = scanner.warnings
                self.warnings += said[seen:]
                seen = len(said)
                if rows:
                    yield rows
        finally:
            if mapped is not None:
                mapped.stop()

    def packets(self) -> Iterator[Packet]:
        magic = self._read(4)
        if len(magic) < 4:
            raise CaptureError(f"{self.path}: empty or too short to be a capture file")
        if magic in PCAP_MAGICS:
            self.format = "pcap"
            yield from in_time_order(self._pcap(magic))
        elif magic == PCAPNG_SHB:
            self.format = "pcapng"
            yield from in_time_order(self._pcapng(magic))
        else:
            raise CaptureError(f"{self.path}: {not_a_capture(self.path, magic)}")

    def _pcap(self, magic: bytes) -> Iterator[Packet]:
        endian, unit = PCAP_MAGICS[magic]
        head = self._read(20)
        if len(head) < 20:
            raise CaptureError(f"{self.path}: pcap header is truncated")
        snaplen, linktype = struct.unpack(endian + "II", head[12:20])
        for offset, packet in pcap_records(
            self._read_raw, endian, unit, linktype & 0x0FFFFFFF, 24, self.warnings, snaplen=snaplen
        ):
            self.bytes_read = offset  # where this packet's record starts
            yield packet

    def _pcapng(self, first: bytes) -> Iterator[Packet]:
        endian = "<"
        interfaces: list[tuple[int, int]] = []  # (linktype, if_tsresol byte)
        index = 0
        block_type: bytes | None = first
        while True:
            head = self._read(8) if block_type is None else block_type + self._read(4)
            block_type = None
            if not head:
                return
            if len(head) < 8:
                self.warnings.append("file ends inside a block header")
                return
            if head[:4] == PCAPNG_SHB:
                bom = self._read(4)
                endian = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
                length = struct.unpack(endian + "I", head[4:8])[0]
                rest = self._read(length - 12) if 12 <= length <= MAX_PACKET else b""
                interfaces = []
                if len(rest) < length - 12 or length < 12:
                    self.warnings.append("section header block is damaged")
                    return
                continue
            btype, length = struct.unpack(endian + "II", head)
            if length < 12 or length > MAX_PACKET or length % 4:
                self.warnings.append(
                    f"block of type {btype:#x} has an impossible length "
                    f"{length}: the file is damaged from here on"
                )
                return
            body = self._read(length - 8)
            if len(body) < length - 8:
                self.warnings.append(f"file ends inside a block (type {btype:#x})")
                return
            body = body[:-4]  # trailing copy of the length
            fixed = _FIXED_PART.get(btype, 0)
            if len(body) < fixed:
                # shorter than the block type's fixed fields: skip it, keep reading
                self.warnings.append(
                    f"block of type {btype:#x} is {length} bytes, too short "
                    f"for its {fixed + 12}-byte fixed part; skipped"
                )
                continue
            if btype == 1:  # interface description
                linktype = struct.unpack_from(endian + "H", body)[0]
                interfaces.append((linktype, _ts_resolution(body[8:], endian)))
            elif btype in (6, 2):  # enhanced packet (and obsolete packet)
                if btype == 6:
                    iface, hi, lo, incl, orig = struct.unpack_from(endian + "IIIII", body)
                else:
                    iface, _drops, hi, lo, incl, orig = struct.unpack_from(endian + "HHIIII", body)
                if iface >= len(interfaces):
                    self.warnings.append(f"packet refers to undeclared interface {iface}")
                    continue
                linktype, resolution = interfaces[iface]
                index += 1
                if incl > len(body) - 20:
                    self.warnings.append(
                        f"packet {index} claims {incl} bytes in a block "
                        f"holding {len(body) - 20}; kept what is there"
                    )
                yield Packet(
                    index,
                    clamp_ts(ticks_to_seconds((hi << 32) | lo, resolution)),
                    linktype,
                    bytes(body[20 : 20 + incl]),
                    orig,
                )
            elif btype == 10:  # decryption secrets
                kind, size = struct.unpack_from(endian + "II", body)
                if kind == SECRETS_TLS_KEY_LOG:
                    self.on_secrets(bytes(body[8 : 8 + size]))
            elif btype == 3:  # simple packet: first interface
                if not interfaces:
                    continue
                orig = struct.unpack_from(endian + "I", body)[0]
                index += 1
                linktype, _resolution = interfaces[0]
                yield Packet(index, 0.0, linktype, bytes(body[4 : 4 + orig]), orig)


_BLOCK = 1 << 20  # bytes read at a time: records are cut from blocks
# what the compiled scanner is fed at a time from a plain file: a block small enough to
# stay in the CPU's cache from the kernel's copy into it to the scanner's reading of it
# (1 MiB blocks cost 0.05 CPU-s more in the kernel on 107 MB)
_SCAN_BLOCK = 1 << 18
_MAP_DROP = 1 << 22  # pages of a map given back behind the scanner


class _Mapped:
    """A plain capture file read through a memory map, a block at a time, for the
    compiled scanner: the kernel copies nothing. A map of a file that shrinks is the
    danger (touching a page past the new end raises SIGBUS): the size is checked before
    each block, and native/src/mapped.rs's guard turns a page that vanishes during a
    block into zeros and stops the scanner there (a warning says so). At the map's end
    (the file may have grown) or when the file shrank, the file is read on from where
    the map stopped; where no guard exists the file is read, not mapped."""

    __slots__ = ("file", "fd", "mm", "view", "slot", "at", "dropped")
    file: Any
    fd: int
    mm: mmap.mmap
    view: memoryview
    slot: int | None  # the guard's (None: stopped)
    at: int  # file offset of the next block
    dropped: int  # pages before this given back

    @classmethod
    def of(cls, file: Any) -> _Mapped | None:
        guard = map_guard()
        if guard is None:
            return None
        try:
            fd = file.fileno()
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or file.tell() != 0:
                return None
            mm = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            return None  # empty, not mappable: read it
        view = memoryview(mm)
        slot = guard(view)
        if slot is None:
            view.release()
            mm.close()
            return None
        self = cls()
        self.file, self.fd, self.mm, self.view, self.slot = file, fd, mm, view, slot
        self.at = self.dropped = 0
        return self

    def next(self, n: int) -> memoryview | None:
        """The next ``n`` bytes (fewer at the map's end), or None: read on from here."""
        if self.slot is None:
            return None
        at, end = self.at, min(self.at + n, len(self.view))
        if at >= end or self.size() < end:
            self.stop()
            return None
        if at - self.dropped >= _MAP_DROP:  # the resident set stays one window
            self.mm.madvise(mmap.MADV_DONTNEED, self.dropped, at - self.dropped)
            self.dropped = at
        self.at = end
        return self.view[at:end]

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def stop(self) -> None:
        if self.slot is None:
            return
        map_unguard(self.slot)
        self.slot = None
        try:
            self.file.seek(self.at)
        except (OSError, ValueError):  # closed already: nothing more to read
            pass
        self.view.release()
        try:
            self.mm.close()
        except BufferError:  # a block still referenced: freed with it
            pass


def pcap_records(
    read,
    endian: str,
    unit: float,
    linktype: int,
    offset: int,
    warnings: list[str],
    end: int | None = None,
    snaplen: int = 0,
) -> Iterator[tuple[int, Packet]]:
    """pcap records read with ``read(n)`` from the record header at byte ``offset`` on,
    as (offset, packet), packets numbered from 1. Stops at the end of the data, at a
    record starting at ``end`` or later, or at damage (said in ``warnings``). Reads in
    blocks (two reads per packet cost more than the rest of reading it). ``snaplen``:
    the file header's; a record past the end of the file claiming more than a record
    can hold is damage, not a capture cut short."""
    unpack = struct.Struct(endian + "IIII").unpack_from
    buf, pos, eof = b"", 0, False
    index = 0
    while end is None or offset < end:
        if len(buf) - pos < 16 and not eof:
            more = read(_BLOCK)
            eof = not more
            buf, pos = buf[pos:] + more, 0
        if len(buf) - pos < 16:
            if len(buf) > pos:
                warnings.append(
                    f"file ends inside the header of packet {index + 1} (byte {offset})"
                )
            return
        sec, frac, incl, orig = unpack(buf, pos)
        if incl > MAX_PACKET:
            warnings.append(
                f"packet {index + 1} claims {incl} bytes: the file is damaged from byte {offset} on"
            )
            return
        stop = pos + 16 + incl
        while stop > len(buf) and not eof:
            more = read(max(_BLOCK, stop - len(buf)))
            eof = not more
            buf, stop, pos = buf[pos:] + more, stop - pos, 0
        if stop > len(buf):
            if incl > largest_record(snaplen):  # (a record that big is read if it is there)
                warnings.append(
                    f"packet {index + 1} claims {incl} bytes, more than its capture's "
                    f"records hold (snapshot length {snaplen}), and the file ends "
                    f"{len(buf) - pos - 16} bytes later: the file is damaged from byte "
                    f"{offset} on"
                )
            else:
                warnings.append(
                    f"file ends inside packet {index + 1} at byte {offset} "
                    f"({len(buf) - pos - 16} of {incl} bytes)"
                )
            return
        index += 1
        yield (
            offset,
            Packet(index, clamp_ts(sec + frac * unit), linktype, buf[pos + 16 : stop], orig),
        )
        offset += 16 + incl
        pos = stop


def _ts_resolution(options: bytes, endian: str) -> int:
    """The if_tsresol option (code 9) as its byte; default 6 (microseconds). An option running
    past the block is ignored; resolutions coarser than a second (0 is 10^0, fine; 0x80 is 2^0)
    or finer than 2^-63 are taken as they are and the timestamps clamped (``clamp_ts``)."""
    pos = 0
    while pos + 4 <= len(options):
        code, length = struct.unpack_from(endian + "HH", options, pos)
        if code == 0:
            break
        if code == 9 and length >= 1 and pos + 4 < len(options):
            return options[pos + 4]
        pos += 4 + length + (-length % 4)
    return 6


def ticks_to_seconds(ticks: int, resolution: int) -> float:
    """Whole seconds plus the fraction, computed as pcap's ``sec + usec * 1e-6`` is: the same
    instant read from pcap and from pcapng is the same float (a latency of 1.25 ms must not
    print 1.2 from one file and 1.3 from the other)."""
    exponent = resolution & 0x7F
    per_second = 1 << exponent if resolution & 0x80 else 10**exponent
    unit = 2.0**-exponent if resolution & 0x80 else 10.0**-exponent
    return ticks // per_second + (ticks % per_second) * unit


# a timestamp outside 1970..9999 cannot be a capture time: it is shown as invalid (-1)
TS_MAX = float(LAST_SECOND)
TS_INVALID = -1.0


def clamp_ts(ts: float) -> float:
    return ts if 0.0 <= ts <= TS_MAX else TS_INVALID
