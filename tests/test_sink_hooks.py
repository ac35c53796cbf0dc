"""The engine's hooks are declared once (stream.sink.HOOKS) and checked when a sink is
handed in: a sink missing one is refused at start, every sink of several gets every
event, and the bytes conversion a sink asks for is honoured with several sinks too."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdissect.capture.tls import KeyLog
from kdissect.sources.pcap import CaptureFiles
from kdissect.stream.engine import Engine
from kdissect.stream.sink import HOOKS, BaseSink, Collect, check

TLS = Path(__file__).resolve().parents[1] / "captures" / "tls" / "kafka-tls.pcap"


class _NoTls:
    full = False
    values_conv = None

    def __getattr__(self, name):
        if name == "tls":
            raise AttributeError(name)
        return lambda *a, **k: None


def test_a_sink_without_a_hook_is_refused_naming_it():
    with pytest.raises(TypeError, match="lacks tls"):
        Engine(CaptureFiles([str(TLS)]), _NoTls())
    assert check([BaseSink(), Collect()]) is None
    assert set(HOOKS) <= set(dir(BaseSink))


class _Conv(Collect):
    def __init__(self, conv):
        super().__init__()
        self._conv = conv

    @property
    def values_conv(self):
        return self._conv


def test_two_sinks_that_show_bytes_differently_are_refused_one_is_honoured():
    def hexed(b: bytes) -> str:
        return b.hex()

    with pytest.raises(TypeError, match="show bytes"):
        check([_Conv(hexed), _Conv(bytes.decode)])
    assert check([_Conv(hexed), Collect(), _Conv(hexed)]) is hexed


def test_every_sink_of_several_gets_every_event_of_a_real_tls_capture():
    keys = KeyLog()
    keys.add_file(str(TLS.with_suffix(".keys")))
    sinks = [Collect(), Collect()]
    Engine(CaptureFiles([str(TLS)], keys=keys), sinks).run()
    first, second = sinks
    assert first.exchanges and len(first.exchanges) == len(second.exchanges)
    assert first.tls_facts and len(first.tls_facts) == len(second.tls_facts)


def test_a_callback_sink_gets_each_notes_level(tmp_path):
    """``CallbackSink``'s note callback gets the level with the text (the proxy display
    and the TUI show an error apart from a warning): a file that is not a capture is an
    error, a capture cut in a packet a warning, as a ``Collect`` records them."""
    from kdissect.stream.sink import CallbackSink

    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture file\n" * 8)
    whole = (TLS.parents[1] / "kcat.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(whole[:-7])
    got: list[tuple[str, str]] = []
    paths = [str(junk), str(cut)]
    sink = CallbackSink(lambda ex: None, note=lambda text, level: got.append((level, text)))
    Engine(CaptureFiles(paths), sink).run()
    collected = Collect()
    Engine(CaptureFiles(paths), collected).run()
    assert got == collected.notes
    assert [level for level, text in got if text.startswith(str(junk))] == ["error"]
    assert "warn" in [level for level, text in got if text.startswith(str(cut))]
