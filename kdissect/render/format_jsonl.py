"""--format jsonl: one JSON object per Kafka message (docs/guide/jsonl.md), decoded on worker
processes with -j N (the engine stays in this one)."""

from __future__ import annotations

import sys

from ..stream.fields import ExchangeFields
from ..stream.model import Exchange
from .formats import WriterContext
from .heap import steady_heap
from .lines import capture_field, message_line, with_field
from .records import json_bytes


class JsonlWriter:
    # bodies come from the values-only decoder and enrichment reads summaries
    # (message_json adds what a full tree would find)
    full = False
    # bodies enrichment reads with the values decoder are kept for the lines (bytes as
    # JSON shows them): one decode per message
    values_conv = staticmethod(json_bytes)

    def __init__(self, ctx: WriterContext):
        self.options, self.topic_ids = ctx.options, ctx.topic_ids
        steady_heap()
        self.workers = None
        if ctx.jobs > 1:
            from .jsonl_workers import JsonlWorkers  # only then: processes cost start-up

            self.workers = JsonlWorkers(ctx.options, ctx.jobs, sys.stdout.write, ctx.topic_ids)
        self.field = ""  # the "capture" field's text, when the run reads several files

    def exchange(self, ex: Exchange, view: ExchangeFields | None) -> None:
        if self.workers is not None:
            self.workers.add(ex)
        else:
            lines = [message_line(m, self.options, ex, False, self.topic_ids) for m in ex.messages]
            if self.field:
                lines = [with_field(line, self.field) for line in lines]
            # one write per exchange (a write per line was a tenth of a run of small ones)
            sys.stdout.write("".join(lines))

    def tls(self, facts) -> None:
        from .tls import tls_json_line

        line = with_field(tls_json_line(facts), self.field) if self.field else tls_json_line(facts)
        if self.workers is not None:
            self.workers.line(line)
        else:
            sys.stdout.write(line)

    def capture(self, path: str) -> None:
        self.field = capture_field(path)
        if self.workers is not None:
            self.workers.field(self.field)

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()

    def abort(self) -> None:
        if self.workers is not None:
            self.workers.abort()
