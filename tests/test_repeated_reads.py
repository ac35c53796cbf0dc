"""A process that reads capture after capture (the TUI, a Spark worker, the fuzzer) keeps
no memory from one read to the next: cyclic garbage left before a read stays collectable
(the reader sets aside what exists only once per process), and a read leaves no cycles."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from kdissect.sources.pcap import read_captures
from kdissect.stream.enrich import Enricher
from kdissect.stream.sink import Sink
from kdissect.protocol import Options

CAPTURE = str(Path(__file__).parent.parent / "captures" / "admin.pcap")


class Cycle:
    def __init__(self) -> None:
        self.me = self


class Decoded(Sink):
    """Decodes every message fully and lists its problems, as the JSON-lines view does."""

    def exchange(self, ex) -> None:
        for m in ex.messages:
            m.decoded(Options()).tree.findings()


def read() -> None:
    read_captures([CAPTURE], Enricher(Decoded(), Options(), full=True))


def test_cyclic_garbage_made_between_reads_is_still_collected():
    read()
    garbage = Cycle()
    ref = weakref.ref(garbage)
    del garbage
    read()
    gc.collect()
    assert ref() is None


@pytest.mark.slow  # (seconds: kept out of the fast tier)
def test_reads_after_the_first_freeze_nothing_and_trees_leave_no_cycles():
    read()
    frozen = gc.get_freeze_count()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        read()
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
        functions = {o.__qualname__ for o in gc.garbage if type(o).__name__ == "function"}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert gc.get_freeze_count() == frozen
    # per-connection state may form cycles (bounded by connections); a message's tree
    # and the walks over it must not (one per message would wait for the collector)
    assert "Node" not in kinds
    assert not {f for f in functions if "findings" in f or "visit" in f}
