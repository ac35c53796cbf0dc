"""Progress of the Spark jobs kdissect runs, and a warning when they wait for resources
that never come (Spark's own "Initial job has not accepted any resources" stays in its
log, and the job just hangs)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from .session import context

STALL_SECONDS = 10.0
STALL_ENV = "KDISSECT_SPARK_STALL_SECONDS"  # another wait before the warning (the tests: 3)


def stall_seconds() -> float:
    """How long a job runs without a task before the warning: $KDISSECT_SPARK_STALL_SECONDS
    when it is a positive number, else STALL_SECONDS."""
    try:
        seconds = float(os.environ.get(STALL_ENV, ""))
    except ValueError:
        return STALL_SECONDS
    return seconds if 0 < seconds < float("inf") else STALL_SECONDS


class Tracker:
    """Reports the tasks of each stage of the jobs run inside it to ``update(stage_number,
    done, total)``, stages numbered from 0 in the order they appear: from the status
    tracker of a classic session, or from Spark Connect's progress messages. If no task
    has run after ``stall`` seconds (None: ``stall_seconds()``), ``on_stall(seconds)`` is
    told once."""

    def __init__(
        self,
        spark,
        update: Callable[[int, int, int], None],
        on_stall: Callable[[float], None] | None = None,
        stall: float | None = None,
    ):
        self.spark, self.sc, self.update = spark, context(spark), update
        self.on_stall = on_stall
        self.stall = stall_seconds() if stall is None else stall
        self.group = f"kdissect-{id(self)}"
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.ran = False  # a task has run (or finished)
        self.connect = self.sc is None and hasattr(spark, "registerProgressHandler")
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        if self.sc is not None:
            self.sc.setJobGroup(self.group, "kdissect")
        elif self.connect:
            self.spark.registerProgressHandler(self._connect_progress)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        if self.sc is not None:
            self._poll_once(self.sc.statusTracker())  # the end, which polls may miss
        if self.connect:
            self.spark.removeProgressHandler(self._connect_progress)

    def _report(self, stages) -> None:
        for number, (done, running, total) in enumerate(stages):
            self.ran = self.ran or bool(done or running)
            if total:
                self.update(number, done, total)

    def _connect_progress(
        self, stages=None, inflight_tasks=0, operation_id=None, done=False
    ) -> None:
        self.ran = self.ran or bool(inflight_tasks)
        self._report(
            (s.num_completed_tasks, 0, s.num_tasks)
            for s in sorted(stages or [], key=lambda s: s.stage_id)
        )

    def _poll_once(self, tracker) -> None:
        ids = sorted(
            {
                stage
                for job in tracker.getJobIdsForGroup(self.group)
                for stage in (getattr(tracker.getJobInfo(job), "stageIds", None) or [])
            }
        )
        infos = [tracker.getStageInfo(i) for i in ids]
        self._report(
            (i.numCompletedTasks, i.numActiveTasks, i.numTasks) for i in infos if i is not None
        )

    def _poll(self):
        tracker = self.sc.statusTracker() if self.sc is not None else None
        while not self.stop.wait(0.2):
            if tracker is not None:
                self._poll_once(tracker)
            waited = time.monotonic() - self.started
            if (
                not self.ran
                and self.on_stall is not None
                and waited >= self.stall
                and not self._has_executors()
            ):
                self.on_stall(waited)
                self.on_stall = None

    def _has_executors(self) -> bool:
        """Whether the job has somewhere to run. The status tracker hears of tasks
        through Spark's listener bus, which lags seconds behind on a busy machine, so
        "no task seen yet" alone is no stall: a local master always runs tasks, and a
        cluster's are stalled only while no executor (besides the driver) is there."""
        if self.sc is None:
            return False
        try:
            if self.sc.master.startswith("local"):
                return True
            return self.sc._jsc.sc().getExecutorMemoryStatus().size() > 1
        except Exception:
            return False
