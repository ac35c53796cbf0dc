"""A log dir written by a real Apache Kafka broker with what an operator asks about:
a transaction committed and one aborted (lz4, so each batch has a codec), a tombstone,
records deleted by DeleteRecords but still in the segment, a consumer group's offset
commits (__consumer_offsets) and the transaction coordinator's records
(__transaction_state). Copied out of the running broker (the session's node) into a
log dir of its own: the topics' partitions, the internal partitions that hold records,
and the checkpoint files."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

TXN, DELETED = "ops-txn", "ops-deleted"
DELETED_BELOW = 6  # DeleteRecords moves ops-deleted's log start offset here
GROUP = "ops-group"
TXN_ID = "ops-txn-producer"


def _records(part: Path) -> int:
    from kdissect.protocol import Options
    from kdissect.sources.logunits import walk

    n = 0
    for item in walk([str(part)], Options()):
        if item.kind == "batch" and item.tree is not None:
            rc = item.tree.child("record_count")
            if rc is not None and isinstance(rc.value, int):
                n += rc.value
    return n


def write(bootstrap: str, log_dir: Path, target: Path) -> Path:
    """Produce the scenario through ``bootstrap`` and copy what the broker wrote under
    ``log_dir`` to ``target`` (a new log dir); returns ``target``."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TXN, 1, 1), NewTopic(DELETED, 1, 1)]).values():
        f.result(30)
    tp = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TXN_ID,
            "compression.type": "lz4",
            "linger.ms": 5000,
        }
    )
    tp.init_transactions(30)
    for commit in (True, False):
        tp.begin_transaction()
        for i in range(3):
            tp.produce(
                TXN,
                key=b"t%d" % i,  # repeated: lz4 shrinks them
                value=(b"committed " if commit else b"aborted ") * 30,
            )
        tp.flush(30)  # one batch per transaction
        (tp.commit_transaction if commit else tp.abort_transaction)(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):  # a batch per record
        p.produce(DELETED, key=b"d%d" % i, value=None if i == 8 else b"value %d" % i)
        p.flush(30)
    admin.delete_records([TopicPartition(DELETED, 0, DELETED_BELOW)])[
        TopicPartition(DELETED, 0, DELETED_BELOW)
    ].result(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(TXN, 0, 2)], asynchronous=False)
    c.close()
    target.mkdir(parents=True, exist_ok=True)
    want = {TXN: 8, DELETED: 10}  # records: 3 + marker, 3 + marker; 10
    deadline = time.monotonic() + 30
    while True:
        for topic in want:
            shutil.copytree(log_dir / f"{topic}-0", target / f"{topic}-0", dirs_exist_ok=True)
        if (
            all(_records(target / f"{t}-0") >= n for t, n in want.items())
            and _has_epoch_start(target / f"{DELETED}-0")
            or time.monotonic() > deadline
        ):
            break
        time.sleep(0.2)
    for part in log_dir.iterdir():
        if part.name.startswith(("__consumer_offsets-", "__transaction_state-")) and any(
            s.stat().st_size for s in part.glob("*.log")
        ):
            shutil.copytree(part, target / part.name, dirs_exist_ok=True)
    for name in (
        "meta.properties",
        "log-start-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
    ):
        if (log_dir / name).is_file():
            shutil.copy(log_dir / name, target / name)
    return target


def _has_epoch_start(part: Path) -> bool:
    """Whether the leader-epoch checkpoint says DeleteRecords' new log start (it is
    flushed in the background)."""
    p = part / "leader-epoch-checkpoint"
    lines = p.read_text().split() if p.is_file() else []
    return len(lines) >= 4 and lines[3] == str(DELETED_BELOW)
