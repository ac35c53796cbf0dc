"""Drive the fuzz targets: hypothesis draws the stream of inputs (a random seed per
example), and each example runs a batch of inputs made from it by the targets' fast
mutators. Any failure (an escaped exception, an input over a second of CPU, peak RSS
over the limit) saves the failing input under tests/fuzz/regressions/ and is raised."""

from __future__ import annotations

import random
import time

from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from . import harness as h
from . import tls_target

TARGETS = {
    # name: (make an input from an rng, run the target on it, what to save beside it)
    "hinted": (
        h.hinted_input,
        lambda a: h.decode_hinted(*a),
        lambda a: (a[0], f"{a[1]} {a[2]} {a[3]}"),
    ),
    "guessed": (h.guessed_input, h.decode_guessed, lambda a: (a, "")),
    "capture": (h.capture_input, h.read_capture, lambda a: (a, "")),
    "blob": (h.blob_input, h.parse_blob_text, lambda a: (a, "")),
    "segment": (h.segment_input, h.read_segment, lambda a: (a, "")),
    "grammar": (
        h.grammar_input,
        lambda a: h.parse_grammar_text(*a),
        lambda a: (a[0].encode(), a[1].hex()),
    ),
    "tls": (tls_target.tls_input, tls_target.run_tls, lambda a: (a, "")),
}


def _hostile_targets() -> dict:
    """Issue 22's targets (filters, the proxy's framing, TCP reassembly, pastes)."""
    from .hostile_targets import targets

    return targets()


TARGETS.update(_hostile_targets())


def _native_target() -> dict:
    """Issue 28's: both packet paths on the same capture, compared."""
    from .native_target import native_input, run_native

    return {"native": (native_input, run_native, lambda a: (a, ""))}


TARGETS.update(_native_target())


def _logjson_target() -> dict:
    """Issue 25's: kdissect log's compiled record lines against the Python reference."""
    from .logjson_target import logjson_input, run_jsonrec, run_logjson, run_rectable, run_views

    return {
        "logjson": (logjson_input, run_logjson, lambda a: (a, "")),
        "jsonrec": (logjson_input, run_jsonrec, lambda a: (a, "")),
        # issue 37's: the Record views against the generated record loop
        "records": (logjson_input, run_views, lambda a: (a, "")),
        # issue 43's: the records table's compiled batch walker against its reference
        "rectable": (logjson_input, run_rectable, lambda a: (a, "")),
    }


TARGETS.update(_logjson_target())


def _msgvalues_target() -> dict:
    """Issue 43's: the compiled read of message values against the generated readers."""
    from .msgvalues_target import msgvalues_input, run_bodyjson, run_msgvalues

    return {
        "msgvalues": (msgvalues_input, run_msgvalues, lambda a: (a, "")),
        # the JSON lines' body text written compiled, against the readers and json
        "bodyjson": (msgvalues_input, run_bodyjson, lambda a: (a, "")),
    }


TARGETS.update(_msgvalues_target())


def _avro_target() -> dict:
    """Issue 27's: the compiled Avro reader against the Python one."""
    from .avro_target import avro_input, run_avro

    return {"avro": (avro_input, run_avro, lambda a: (a, ""))}


TARGETS.update(_avro_target())


def _parquet_target() -> dict:
    """Issue 28's: kdissect's Parquet writer, read back by pyarrow."""
    from .parquet_target import parquet_input, run_parquet

    return {"parquet": (parquet_input, run_parquet, lambda a: (a, ""))}


TARGETS.update(_parquet_target())


def _midway_target() -> dict:
    """Issue 36's: connections seen without their start."""
    from .midway_target import midway_input, run_midway

    return {"midway": (midway_input, run_midway, lambda a: (a, ""))}


TARGETS.update(_midway_target())


def _files_targets() -> dict:
    """Issue 39's: log files, bounded JSON, registry answers, schemas, key logs."""
    from .files_target import targets

    return targets()


TARGETS.update(_files_targets())


def _relay_target() -> dict:
    """Issue 44's: the thread forwarder's relay over loopback sockets."""
    from .relay_target import relay_input, run_relay

    return {"relay": (relay_input, run_relay, lambda a: (a, ""))}


TARGETS.update(_relay_target())

CPU_LIMIT = 1.0  # seconds of CPU one input may take (CPU, not wall: the machine
# is shared, and a loaded box must not fail the run)


class InputFailed(Exception):
    pass


def warm_up() -> None:
    """Imports and caches that cost seconds once (kio's schemas on the first guess) must
    not count against the first input."""
    from kdissect.protocol import guess

    guess(b"\x00" * 16)
    h.seed_messages(), h.seed_captures(), h.seed_blobs(), h.seed_grammars(), h.seed_segments()
    tls_target.seeds()


def run(target: str, examples: int, batch: int = 50, seed: int | None = None) -> int:
    """Run ``target`` on ``examples`` x ``batch`` inputs; returns how many ran."""
    make, body, saved = TARGETS[target]
    warm_up()
    h.reset_peak_memory()
    count = [0]

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        derandomize=seed is not None,
    )
    @given(
        st.integers(0, 2**64 - 1)
        if seed is None
        else st.just(seed).flatmap(lambda s: st.integers(0, 2**64 - 1).map(lambda x: x ^ s))
    )
    def fuzz(stream_seed):
        rng = random.Random(stream_seed)
        for _ in range(batch):
            args = make(rng)
            start = time.perf_counter()
            try:
                body(args)
            except Exception as e:
                _fail(target, saved(args), f"{type(e).__name__}: {e}")
            if time.perf_counter() - start > CPU_LIMIT:
                # slow on the wall clock: measure the CPU it takes (reading the CPU clock
                # costs a system call, too much for every input)
                cpu = time.process_time()
                body(args)
                spent = time.process_time() - cpu
                if spent > CPU_LIMIT:
                    _fail(target, saved(args), f"took {spent:.2f} s of CPU")
            count[0] += 1
        h.check_memory()

    fuzz()
    return count[0]


def _fail(target: str, saved: tuple[bytes, str], why: str) -> None:
    path = h.save_regression(target, *saved)
    raise InputFailed(f"{target}: {why}; input saved as {path}")
