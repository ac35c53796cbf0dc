"""Kafka's own DumpLogSegments (`kafka-dump-log --deep-iteration --print-data-log`) as the
oracle for `kdissect log`: its text parsed into batches and records, and a comparison with
kdissect's JSON lines that returns every difference (an empty list: they agree)."""

from __future__ import annotations

import re
from typing import Any

_PAIR = re.compile(r"(\w+): ")
_JAVA_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|-?\d+|true|false|null)(?=[,)])")
_RECORD_KEYS = (
    "offset",
    "CreateTime",
    "LogAppendTime",
    "NoTimestampType",
    "keySize",
    "valueSize",
    "sequence",
    "headerKeys",
    "key",
    "payload",
    "controlType",
    "endTxnMarker",
    "coordinatorEpoch",
    "record",
)


def _fields(line: str, last: tuple[str, ...] = ()) -> dict[str, str]:
    """``name: value name: value ...``; a name in ``last`` takes the rest of the line
    (keys and payloads hold spaces)."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(line):
        m = _PAIR.match(line, pos)
        if not m:
            break
        name = m.group(1)
        start = m.end()
        if name in last:
            # the value runs to the next known later field, or to the end
            stop = len(line)
            for later in last[last.index(name) + 1 :]:
                i = line.find(f" {later}: ", start)
                if i >= 0:
                    stop = min(stop, i)
            out[name] = line[start:stop]
            pos = stop + 1
            continue
        if name == "headerKeys" and line.startswith("[", start):
            stop = line.find("] ", start)
            stop = len(line) if stop < 0 else stop + 1
            out[name] = line[start:stop]
            pos = stop + 1
            continue
        nxt = line.find(" ", start)
        nxt = len(line) if nxt < 0 else nxt
        out[name] = line[start:nxt]
        pos = nxt + 1
    return out


def parse(text: str) -> dict[str, list[dict]]:
    """file name -> its batches (each with ``records``), from kafka-dump-log's output."""
    files: dict[str, list[dict]] = {}
    current: list[dict] | None = None
    last_field: tuple[dict, str] | None = None
    for line in text.split("\n"):
        if (
            last_field is not None
            and not line.startswith(("| offset: ", "baseOffset: ", "Dumping "))
            and line
        ):
            record, name = last_field  # a key or payload spanning lines
            record[name] += "\n" + line
            continue
        last_field = None
        if line.startswith("Dumping "):
            current = files.setdefault(line[len("Dumping ") :].strip(), [])
        elif current is None:
            continue
        elif line.startswith("baseOffset: "):
            b = _fields(line)
            b["records"] = []
            current.append(b)
        elif line.startswith("| offset: ") and current:
            rec = _fields(line[2:], ("key", "payload", "record"))
            rest = (
                line.split("headerKeys: ", 1)[1].split(" ", 1)[1]
                if "headerKeys: " in line and " " in line.split("headerKeys: ", 1)[1]
                else ""
            )
            if rest and not rest.startswith(("key: ", "payload: ", "endTxnMarker: ", "record: ")):
                rec["control"] = rest  # 4.x: "LeaderChange: {...}", "SnapshotHeader {...}"
                rec.pop("LeaderChange", None)
            current[-1]["records"].append(rec)
            tail = [n for n in ("record", "payload", "key") if n in rec]
            last_field = (rec, tail[0]) if tail else None
    return files


def _java_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict) and "hex" in value:
        return bytes.fromhex(value["hex"]).decode("utf-8", "replace")
    return str(value)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _java_scalar(v: Any) -> str | None:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return f"'{v}'"
    return None


def _compare_decoded(
    where: str,
    ours: dict | None,
    schema: str | None,
    theirs: str,
    diffs: list[str],
    with_version: bool,
) -> None:
    """``theirs`` is ``Name(field=value, ...) at version N``: the name, the version and
    every top-level scalar field must agree."""
    m = re.match(r"(\w+)\((.*)\) at version (\d+)$", theirs.strip(), re.S)
    if not m:
        diffs.append(f"{where}: cannot read kafka-dump-log's {theirs[:80]!r}")
        return
    name, body, version = m.group(1), m.group(2), int(m.group(3))
    if ours and name not in ours and f"Legacy{name}" in ours:  # 4.x's names of type 0
        name = f"Legacy{name}"
    if not ours or name not in ours:
        diffs.append(f"{where}: kafka-dump-log decodes {name}, kdissect {schema or 'nothing'}")
        return
    if with_version and schema != f"{name} v{version}":
        diffs.append(f"{where}: {name} v{version} vs kdissect {schema}")
    java = dict(_JAVA_FIELD.findall(body))
    for field, value in ours[name].items():
        want = _java_scalar(value)
        key = _camel(field)
        if want is None or key not in java:
            continue
        if java[key] != want and not (field.endswith("_id") and len(value or "") == 36):
            diffs.append(f"{where}: {name}.{field} = {java[key]} vs kdissect {want}")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _upper_snake(name: str) -> str:
    return _snake(name).upper()


# Kafka's TransactionState (kafka-transaction-coordinator): stateName() by id()
_TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


def _same(theirs: Any, ours: Any, where: str, diffs: list[str]) -> None:
    """Kafka's JSON converters' output (camelCase names, Uuids and bytes as base64) against
    kdissect's plain values; fields kdissect leaves out (unset tagged fields) are skipped,
    and bytes kdissect decoded further (consumer-protocol structures) too."""
    import base64
    import uuid as _uuid

    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            diffs.append(f"{where}: {json_short(theirs)} vs kdissect {json_short(ours)}")
            return
        for k, v in theirs.items():
            mine = _snake(k)
            if mine in ours:
                _same(v, ours[mine], f"{where}.{mine}", diffs)
        return
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            diffs.append(f"{where}: {json_short(theirs)} vs kdissect {json_short(ours)}")
            return
        for i, (a, b) in enumerate(zip(theirs, ours)):
            _same(a, b, f"{where}[{i}]", diffs)
        return
    if theirs == ours or isinstance(ours, dict) and "hex" not in ours:
        return
    if (
        where.endswith(".transaction_status")
        and isinstance(ours, int)
        and 0 <= ours < len(_TRANSACTION_STATES)
        and theirs == _TRANSACTION_STATES[ours]
    ):
        return  # 4.4's decoder prints the state's name, kdissect the code
    if isinstance(theirs, str) and isinstance(ours, str) and len(ours) == 36:
        try:
            if base64.urlsafe_b64encode(_uuid.UUID(ours).bytes).decode().rstrip("=") == theirs:
                return
        except ValueError:
            pass
    if isinstance(theirs, str) and (isinstance(ours, str) or isinstance(ours, dict)):
        raw = bytes.fromhex(ours["hex"]) if isinstance(ours, dict) else ours.encode()
        if base64.b64encode(raw).decode() == theirs:
            return
    diffs.append(f"{where}: {json_short(theirs)} vs kdissect {json_short(ours)}")


def json_short(v: Any) -> str:
    import json

    text = json.dumps(v, default=str)
    return text if len(text) < 100 else text[:97] + "..."


_CONTROL_NAMES = {
    "LeaderChange": ("LEADER_CHANGE", "LeaderChangeMessage"),
    "SnapshotHeader": ("SNAPSHOT_HEADER", "SnapshotHeaderRecord"),
    "SnapshotFooter": ("SNAPSHOT_FOOTER", "SnapshotFooterRecord"),
    "KRaftVersion": ("KRAFT_VERSION", "KRaftVersionRecord"),
    "KRaftVoters": ("KRAFT_VOTERS", "VotersRecord"),
    "Voters": ("KRAFT_VOTERS", "VotersRecord"),
}


def _compare_json_record(rw: str, dr: dict, kr: dict, diffs: list[str]) -> bool:
    """4.x decoders print JSON: internal keys {"type", "data"}, values {"version", "data"},
    metadata values {"type": "X_RECORD", "version", "data"}, control records
    ``Name: {...}``. Returns whether the record was compared this way."""
    import json

    done = False
    if "control" in dr:
        old = re.match(r"controlType: (\w+)$", dr["control"])  # 3.x: the type only
        if old:
            if kr.get("control_type") != old.group(1):
                diffs.append(f"{rw}: control {old.group(1)} vs kdissect {kr.get('control_type')}")
            return True
        m = re.match(r"(\w+):? (\{.*\})$", dr["control"], re.S)
        if not m or m.group(1) not in _CONTROL_NAMES:
            diffs.append(f"{rw}: cannot read kafka-dump-log's {dr['control'][:80]!r}")
            return True
        ctype, schema = _CONTROL_NAMES[m.group(1)]
        if kr.get("control_type") != ctype:
            diffs.append(f"{rw}: control {ctype} vs kdissect {kr.get('control_type')}")
        ours = (kr.get("value_decoded") or {}).get(schema)
        if ours is None:
            diffs.append(f"{rw}: kdissect did not decode the {schema}")
        else:
            _same(json.loads(m.group(2)), ours, f"{rw} {schema}", diffs)
        return True
    for part, mine in (("key", "key"), ("payload", "value")):
        text = dr.get(part)
        if not text or not text.startswith('{"'):
            continue
        try:
            theirs = json.loads(text)
        except ValueError:
            continue
        if not isinstance(theirs, dict) or "data" not in theirs:
            continue
        done = True
        decoded = kr.get(f"{mine}_decoded")
        schema = kr.get(f"{mine}_schema") or ""
        if not decoded:
            diffs.append(f"{rw}: kafka-dump-log decodes the {mine}, kdissect does not")
            continue
        name = next(iter(decoded))
        if (
            isinstance(theirs.get("type"), str)
            and not theirs["type"].isdigit()
            and theirs["type"] != _upper_snake(name)
        ):
            diffs.append(f"{rw}: {theirs['type']} vs kdissect {name}")
        if "version" in theirs and mine == "value" and schema != f"{name} v{theirs['version']}":
            diffs.append(f"{rw}: version {theirs['version']} vs kdissect {schema}")
        _same(theirs["data"], decoded[name], f"{rw} {name}", diffs)
    return done


# kafka-dump-log --remote-log-metadata-decoder prints the classes' toString(): their names,
# kdissect's schema for each, and the states (enums) by their codes
_REMOTE = {
    "RemoteLogSegmentMetadata": "RemoteLogSegmentMetadataRecord",
    "RemoteLogSegmentMetadataUpdate": "RemoteLogSegmentMetadataUpdateRecord",
    "RemotePartitionDeleteMetadata": "RemotePartitionDeleteMetadataRecord",
}
_SEGMENT_STATES = (
    "COPY_SEGMENT_STARTED",
    "COPY_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
    "DELETE_SEGMENT_FINISHED",
)
_PARTITION_STATES = (
    "DELETE_PARTITION_MARKED",
    "DELETE_PARTITION_STARTED",
    "DELETE_PARTITION_FINISHED",
)
_REMOTE_NAMES = {
    "startOffset": "start_offset",
    "endOffset": "end_offset",
    "brokerId": "broker_id",
    "maxTimestampMs": "max_timestamp_ms",
    "eventTimestampMs": "event_timestamp_ms",
    "segmentSizeInBytes": "segment_size_in_bytes",
    "txnIdxEmpty": "txn_index_empty",
}


def _b64_uuid(text: str) -> str:
    import base64
    import uuid as _uuid

    return str(_uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")))


def _compare_remote(rw: str, payload: str, kr: dict, diffs: list[str]) -> bool:
    """A ``__remote_log_metadata`` record as kafka-dump-log prints it (``Name{field=value,
    ...}``) against kdissect's decoded value, every field; False if it is not one."""
    m = re.match(r"(\w+)\{(.*)\}$", payload, re.S)
    if not m or m.group(1) not in _REMOTE:
        return False
    schema = _REMOTE[m.group(1)]
    ours = (kr.get("value_decoded") or {}).get(schema)
    if ours is None:
        diffs.append(f"{rw}: kafka-dump-log decodes {schema}, kdissect {kr.get('value_schema')}")
        return True
    body = m.group(2)
    seen: list[str] = []

    def same(what: str, theirs: Any, mine: Any) -> None:
        seen.append(what)
        if theirs != mine:
            diffs.append(f"{rw} {schema}.{what}: {theirs!r} vs kdissect {mine!r}")

    where = re.search(r"topic(?:Id)?Partition=([A-Za-z0-9_-]{22}):(.+)-(\d+)[,}]", body)
    tp = (
        (ours.get("remote_log_segment_id") or {}).get("topic_id_partition")
        or ours.get("topic_id_partition")
        or {}
    )
    if where:
        same(
            "topic_id_partition",
            (_b64_uuid(where.group(1)), where.group(2), int(where.group(3))),
            (tp.get("id"), tp.get("name"), tp.get("partition")),
        )
    segment = re.search(r"RemoteLogSegmentId\{.*?, id=([A-Za-z0-9_-]{22})\}", body)
    if segment:
        same(
            "segment id",
            _b64_uuid(segment.group(1)),
            (ours.get("remote_log_segment_id") or {}).get("id"),
        )
    for name, value in re.findall(
        r"(\w+)=(-?\d+|true|false|[A-Z][A-Z_]+)(?=[,}]|$)",
        body.replace("segmentLeaderEpochs={", "segmentLeaderEpochs=["),
    ):
        if name in _REMOTE_NAMES:
            same(_REMOTE_NAMES[name], value, _java_scalar(ours.get(_REMOTE_NAMES[name])))
        elif name == "state":
            states = (
                _PARTITION_STATES if "remote_partition_delete_state" in ours else _SEGMENT_STATES
            )
            field = (
                "remote_partition_delete_state"
                if states is _PARTITION_STATES
                else "remote_log_segment_state"
            )
            same(
                field,
                value,
                states[ours[field]] if 0 <= ours.get(field, -1) < len(states) else ours.get(field),
            )
        elif not name.isdigit():
            diffs.append(f"{rw} {schema}: kafka-dump-log's {name}={value} not compared")
    epochs = re.search(r"segmentLeaderEpochs=\{([^}]*)\}", body)
    if epochs:
        pairs = [tuple(map(int, p.split("="))) for p in epochs.group(1).split(", ") if p]
        same(
            "segment_leader_epochs",
            pairs,
            [(e["leader_epoch"], e["offset"]) for e in ours.get("segment_leader_epochs", [])],
        )
    if "customMetadata=Optional.empty" in body:
        same("custom_metadata", None, ours.get("custom_metadata"))
    return True


def compare(dump: list[dict], ours: list[dict]) -> list[str]:
    """Differences between kafka-dump-log's batches of one segment and kdissect's JSON
    lines of the same segment (``type`` batch and record objects)."""
    diffs: list[str] = []
    batches = [o for o in ours if o["type"] == "batch"]
    records = [o for o in ours if o["type"] == "record"]
    if len(dump) != len(batches):
        diffs.append(f"{len(dump)} batches from kafka-dump-log, {len(batches)} from kdissect")
    by_pos = {b["position"]: b for b in batches}
    recs_by_batch: dict[int, list[dict]] = {}
    for r in records:
        recs_by_batch.setdefault(r["batch_position"], []).append(r)
    for d in dump:
        pos = int(d["position"])
        k = by_pos.get(pos)
        where = f"batch at {pos}"
        if k is None:
            diffs.append(f"{where}: kdissect has no batch there")
            continue
        checks = {
            "size": k["size"],
            "magic": k["magic"],
            "crc": k["crc"],
            "isvalid": "true" if k["crc_valid"] else "false",
            "compresscodec": k["codec"],
        }
        if k["magic"] == 2:
            checks.update(
                {
                    "baseOffset": k["base_offset"],
                    "lastOffset": k["last_offset"],
                    "count": k["record_count"],
                    "baseSequence": k["base_sequence"],
                    "producerId": k["producer_id"],
                    "producerEpoch": k["producer_epoch"],
                    "partitionLeaderEpoch": k["partition_leader_epoch"],
                    "isTransactional": "true" if k["transactional"] else "false",
                    "isControl": "true" if k["control"] else "false",
                }
            )
        for name, value in checks.items():
            if d.get(name) != str(value):
                diffs.append(f"{where}: {name} {d.get(name)} vs kdissect {value}")
        mine = recs_by_batch.get(pos, [])
        if len(mine) != len(d["records"]):
            diffs.append(f"{where}: {len(d['records'])} records vs kdissect {len(mine)}")
        for dr, kr in zip(d["records"], mine):
            rw = f"{where}, offset {dr['offset']}"
            ts = dr.get("CreateTime", dr.get("LogAppendTime", dr.get("NoTimestampType")))
            if dr["offset"] != str(kr["offset"]):
                diffs.append(f"{rw}: offset vs kdissect {kr['offset']}")
            if ts is not None and ts != str(kr["timestamp"] if kr["timestamp"] is not None else -1):
                diffs.append(f"{rw}: timestamp {ts} vs kdissect {kr['timestamp']}")
            if "headerKeys" in dr:
                keys = dr["headerKeys"][1:-1]
                # 4.3 prints keys with commas; 3.x test files had key=value pairs
                sep = "," if "=" not in keys else ", "
                mine_keys = sep.join(
                    f"{h['key']}={_java_text(h['value'])}" if "=" in keys else h["key"]
                    for h in kr["headers"]
                )
                if keys != mine_keys:
                    diffs.append(f"{rw}: header keys [{keys}] vs kdissect [{mine_keys}]")
            if _compare_json_record(rw, dr, kr, diffs) or _compare_remote(
                rw, dr.get("payload", ""), kr, diffs
            ):
                continue
            if "control" not in dr and "endTxnMarker" not in dr and "record" not in dr:
                # 4.x leaves a null key or payload out of the line
                dr.setdefault("key", "null")
                dr.setdefault("payload", "null")
            if "key" in dr and dr["key"] != _java_text(kr["key"]):
                diffs.append(f"{rw}: key {dr['key'][:60]!r} vs kdissect {kr['key']!r:.60}")
            if (
                "payload" in dr
                and not dr["payload"].startswith("ApiMessageAndVersion(")
                and dr["payload"] != _java_text(kr["value"])
            ):
                diffs.append(
                    f"{rw}: payload {dr['payload'][:60]!r} vs kdissect {kr['value']!r:.60}"
                )
            if "payload" in dr and dr["payload"].startswith("ApiMessageAndVersion("):
                _compare_decoded(
                    rw,
                    kr.get("value_decoded"),
                    kr.get("value_schema"),
                    dr["payload"][len("ApiMessageAndVersion(") : -1],
                    diffs,
                    True,
                )
            if "record" in dr:
                m = re.match(
                    r"Record\(key=ApiMessageAndVersion\((.*?\) at version \d+)\), "
                    r"value=(?:ApiMessageAndVersion\((.*)\)|null)\)$",
                    dr["record"],
                    re.S,
                )
                if not m:
                    diffs.append(f"{rw}: cannot read kafka-dump-log's {dr['record'][:80]!r}")
                else:
                    _compare_decoded(
                        rw + " key",
                        kr.get("key_decoded"),
                        kr.get("key_schema"),
                        m.group(1),
                        diffs,
                        False,
                    )
                    if m.group(2):
                        _compare_decoded(
                            rw + " value",
                            kr.get("value_decoded"),
                            kr.get("value_schema"),
                            m.group(2),
                            diffs,
                            True,
                        )
            if "controlType" in dr:
                ct = kr.get("control_type")
                if ct != dr["controlType"]:
                    diffs.append(f"{rw}: control type {dr['controlType']} vs kdissect {ct}")
            if "endTxnMarker" in dr:
                if kr.get("control_type") != dr["endTxnMarker"]:
                    diffs.append(
                        f"{rw}: marker {dr['endTxnMarker']} vs kdissect {kr.get('control_type')}"
                    )
                if dr.get("coordinatorEpoch") != str(kr.get("coordinator_epoch")):
                    diffs.append(
                        f"{rw}: coordinator epoch {dr.get('coordinatorEpoch')} vs "
                        f"kdissect {kr.get('coordinator_epoch')}"
                    )
    return diffs
