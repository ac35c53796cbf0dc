"""JSON lines rendered on worker processes and written in the order one process writes.

Framing and pairing are sequential (a connection's messages depend on the ones before);
decoding every field and encoding it as JSON is not, and it is most of the work. So the
engine runs in this process as always, and the messages it hands out are sent in chunks
to ``jobs`` workers, which decode them (values-only, see protocol/values.py) and return
their lines; chunks are written in the order they were sent, and at most one more than
there are workers is in flight, which bounds memory whatever the capture's size. The
workers start with the first full chunk: a capture smaller than one chunk is rendered
here, by the same function, without forking them (they were most of its run).
"""

from __future__ import annotations

import dataclasses
import operator
import pickle
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..protocol import Options
from ..stream.model import Exchange, KafkaMessage
from .heap import give_back
from .lines import message_line, with_field

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

CHUNK_BYTES = 1 << 20  # message bytes per chunk: big enough to amortise the hand-off
CHUNK_EXCHANGES = 256


# what a worker needs of an exchange and of its messages, as tuples pickled when it is
# added (a snapshot: one process renders at once, and a view must not see later
# changes): several times cheaper than copying the objects and pickling them as objects
_MESSAGE = operator.attrgetter(*(f.name for f in dataclasses.fields(KafkaMessage)))
_EXCHANGE = operator.attrgetter(
    "client", "broker", "stream", "seq", "expected", "findings", "status"
)


def _pack(ex: Exchange) -> tuple:
    req, resp = ex.request, ex.response
    return (
        None if req is None else _MESSAGE(req),
        None if resp is None else _MESSAGE(resp),
        _EXCHANGE(ex),
    )


def _unpack(packed: tuple) -> Exchange:
    req, resp, (client, broker, stream, seq, expected, findings, status) = packed
    return Exchange(
        None if req is None else KafkaMessage(*req),
        None if resp is None else KafkaMessage(*resp),
        client,
        broker,
        stream,
        seq,
        expected,
        findings,
        status=status,
    )


def _loads(item: bytes | tuple) -> tuple:
    return pickle.loads(item) if isinstance(item, bytes) else item


def _render(
    chunk: list[bytes | tuple],
    options: Options,
    topic_ids: Mapping[str, str] | None,
    field: str = "",
) -> str:
    try:
        lines = (
            message_line(m, options, ex, False, topic_ids)
            for ex in map(_unpack, map(_loads, chunk))
            for m in ex.messages
        )
        return "".join((with_field(line, field) for line in lines) if field else lines)
    finally:
        give_back()


def _leave_ctrl_c_to_the_parent() -> None:
    """A worker ignores SIGINT (Ctrl-C reaches the whole process group): interrupted
    inside the pool's queue it held a lock, and the parent then waited for it forever;
    the parent stops the workers itself."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class JsonlWorkers:
    """``add`` exchanges in output order; ``close`` writes the rest and stops the workers."""

    def __init__(
        self,
        options: Options,
        jobs: int,
        write: Callable[[str], object],
        topic_ids: Mapping[str, str] | None = None,
    ):
        self.options, self.write, self.jobs = options, write, jobs
        # the topic ids the engine has learnt (it fills ``topic_ids`` as it goes): a
        # chunk is rendered with a copy of them as they were when its exchanges were
        # added, as one process renders each exchange when it comes
        self.topic_ids = topic_ids
        self.chunk_ids = dict(topic_ids) if topic_ids is not None else None
        self.ids_known = 0
        self.pool: ProcessPoolExecutor | None = None  # with the first full chunk
        self.ahead = jobs + 1  # one waiting beyond those being decoded: enough
        self.chunk: list[bytes | tuple] = []
        self.chunk_bytes = 0
        self.inflight: deque[Future] = deque()
        self.capture = ""  # the lines' "capture" field (lines.capture_field), if any

    def field(self, field: str) -> None:
        """The exchanges added from now on get this ``capture`` field."""
        self._send()  # (those before are another file's)
        self.capture = field

    def add(self, ex: Exchange) -> None:
        ids = self.topic_ids
        if ids is not None and len(ids) != self.ids_known:
            self._send()  # the exchanges added before these were learnt
            self.ids_known = len(ids)
            self.chunk_ids = dict(ids)
        size = sum(len(m.data) for m in ex.messages)
        if size >= CHUNK_BYTES:
            # a big exchange goes alone and unpickled: the pool pickles it once (a copy
            # made here as well would hold a third copy of a message of hundreds of MB)
            self._send(full=True)
            self.chunk.append(_pack(ex))
            self._send(full=True)
            return
        self.chunk.append(pickle.dumps(_pack(ex), pickle.HIGHEST_PROTOCOL))
        self.chunk_bytes += size
        if self.chunk_bytes >= CHUNK_BYTES or len(self.chunk) >= CHUNK_EXCHANGES:
            self._send(full=True)

    def _send(self, full: bool = False) -> None:
        """Hand the chunk to the workers; before they are started (no chunk was ever
        full), render it here and write it: nothing is in flight before it."""
        if not self.chunk:
            return
        if self.pool is None:
            if not full:
                self.write(_render(self.chunk, self.options, self.chunk_ids, self.capture))
                self.chunk, self.chunk_bytes = [], 0
                return
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # fork: workers start at once, with everything already imported
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else None)
            self.pool = ProcessPoolExecutor(
                self.jobs, mp_context=context, initializer=_leave_ctrl_c_to_the_parent
            )
        self.inflight.append(
            self.pool.submit(_render, self.chunk, self.options, self.chunk_ids, self.capture)
        )
        self.chunk, self.chunk_bytes = [], 0
        while self.inflight and (len(self.inflight) > self.ahead or self.inflight[0].done()):
            self.write(self.inflight.popleft().result())

    def line(self, text: str) -> None:
        """A line that needs no decoding (a TLS connection's), written in its place among
        the exchanges' lines."""
        self._send()
        if self.pool is None:  # nothing in flight: write it now
            self.write(text)
            return
        from concurrent.futures import Future  # (with the pool: imported by then)

        ready: Future = Future()
        ready.set_result(text)
        self.inflight.append(ready)

    def close(self) -> None:
        try:
            self._send()
            while self.inflight:
                self.write(self.inflight.popleft().result())
        finally:
            self.abort()

    def abort(self) -> None:
        """Stop without writing what is pending (the reader went away)."""
        for f in self.inflight:
            f.cancel()
        self.inflight.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
