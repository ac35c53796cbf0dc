"""Packets from a network interface, as they pass (scapy over libpcap). Needs the right
to capture: root, or CAP_NET_RAW and CAP_NET_ADMIN on the Python binary."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable

from .pcapfile import Packet


SNAPLEN = 262144  # bytes kept of each packet (tcpdump's default)


class LiveError(Exception):
    pass


def interfaces() -> list[str]:
    from scapy.arch import get_if_list

    return get_if_list()


def _open(iface: str, bpf: str | None):
    """A listening socket on ``iface``. libpcap when present: like tcpdump it sees each
    loopback packet once (Linux's own packet socket sees them twice)."""
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    import scapy.layers.inet  # noqa: F401  (registers Ether, IP: link types resolve)
    import scapy.layers.l2  # noqa: F401
    from scapy.config import conf

    try:
        conf.use_pcap = True
    except Exception:  # no libpcap: the native socket will do
        pass
    try:
        import scapy.arch.libpcap as libpcap

        # scapy opens libpcap with a snapshot length of 65535 bytes: every packet of
        # loopback (MTU 65536) or of an interface merging segments (GRO) lost its end,
        # and no message longer than a packet was ever whole. tcpdump's length:
        libpcap.MTU = SNAPLEN
    except ImportError:
        pass
    from scapy.error import Scapy_Exception

    try:
        return conf.L2listen(iface=iface, filter=bpf), conf.l2types.layer2num
    except Scapy_Exception as e:  # libpcap refused the filter
        raise LiveError(
            f"bad capture filter {bpf!r}: {e}; -f takes tcpdump's BPF syntax, e.g. 'tcp port 9092'"
        ) from None


def sniff(
    iface: str,
    on_packet: Callable[[Packet], None],
    stop: threading.Event,
    bpf: str | None = "tcp",
    count: int = 0,
    timeout: float | None = None,
) -> int:
    """Call ``on_packet`` for each packet on ``iface`` until ``stop`` is set, ``count``
    packets were seen or ``timeout`` seconds passed; returns the packets seen. Raises
    LiveError saying what to do when capturing is not allowed or the interface is wrong."""
    # ("any": libpcap's pseudo-interface of every interface, on Linux; not listed)
    if iface not in interfaces() and not (iface == "any" and sys.platform.startswith("linux")):
        listed = ", ".join(interfaces()) + (
            " (and any)" if sys.platform.startswith("linux") else ""
        )
        raise LiveError(f"no interface {iface!r}; this machine has: {listed}")
    try:
        sock, linktypes = _open(iface, bpf)
    except OSError as e:
        denied = (
            isinstance(e, PermissionError)
            or "permission" in str(e).lower()
            or "not permitted" in str(e).lower()
        )
        if denied:
            raise LiveError(
                f"capturing on {iface} is not allowed for this user. Run as root (sudo), "
                f"or give this Python the capabilities once: sudo setcap "
                f"cap_net_raw,cap_net_admin=eip {os.path.realpath(sys.executable)}"
            ) from None
        raise LiveError(f"cannot capture on {iface}: {e.strerror or e}") from None
    linktype = linktypes.get(sock.LL, 1)
    from scapy.sendrecv import AsyncSniffer

    seen = 0
    done = threading.Event()

    def handle(pkt) -> None:
        nonlocal seen
        seen += 1
        raw = bytes(pkt)
        on_packet(
            Packet(seen, float(pkt.time), linktype, raw, getattr(pkt, "wirelen", None) or len(raw))
        )
        if count and seen >= count:
            done.set()

    sniffer = AsyncSniffer(opened_socket=sock, prn=handle, store=False)
    sniffer.start()
    thread = sniffer.thread
    assert thread is not None, "start() made the sniffing thread"
    try:
        waited = 0.0
        while not stop.is_set() and not done.is_set() and thread.is_alive():
            stop.wait(0.05)
            waited += 0.05
            if timeout is not None and waited >= timeout:
                break
    finally:
        if sniffer.running:
            sniffer.stop()
        sock.close()
    return seen
