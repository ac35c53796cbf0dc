"""What an exchange touches: topics and partitions, record counts, errors, read once by
enrichment from its messages' bodies. (What display filters see of an exchange is
``stream/fields.py``.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol import Options, schemas
from ..protocol.internal import METADATA_TOPIC_ID
from ..protocol.names import error_name
from ..protocol.native_ext import bind, chosen, forget_on_change
from ..protocol.layout import Struct
from ..protocol.node import Node
from ..protocol.values import BatchHeads


@dataclass(slots=True, init=False)  # (made per exchange: slots, and __init__ by hand below)
class Facts:
    topics: dict[str, set[int]] = field(default_factory=dict)
    records: int = 0
    errors: list[int] = field(default_factory=list)  # nonzero error codes
    # where each error was: (topic or None, partition or None, code), in errors' order
    error_sites: list[tuple[str | None, int | None, int]] = field(default_factory=list)
    record_bytes: int = 0  # bytes of record data (batches or message sets)
    top_error: int | None = None  # the response's own error_code (a field of its body)
    # how long the client asked the broker to hold the answer, and the field that asked:
    # Fetch/ShareFetch max_wait_ms, JoinGroup rebalance_timeout_ms (session_timeout_ms in v0)
    asked_wait_ms: int | None = None
    asked_wait_field: str | None = None
    throttle_ms: int | None = None  # the response's throttle_time_ms
    # a SyncGroup that brings the group's assignments: its leader's, which waits for no
    # member (the others' are held until it comes)
    leads_sync: bool = False

    def __init__(
        self,
        topics: dict[str, set[int]] | None = None,
        records: int = 0,
        errors: list[int] | None = None,
        error_sites: list[tuple[str | None, int | None, int]] | None = None,
        record_bytes: int = 0,
        top_error: int | None = None,
        asked_wait_ms: int | None = None,
        asked_wait_field: str | None = None,
        throttle_ms: int | None = None,
        leads_sync: bool = False,
    ) -> None:
        """The dataclass's ``__init__`` (the fields in order, their defaults; None: a new
        empty dict or list, as their default factories make), its containers made
        without calling the factories (one per exchange: 0.85k of its 4.3k
        instructions; tests/test_model.py holds it to the fields)."""
        self.topics = {} if topics is None else topics
        self.records = records
        self.errors = [] if errors is None else errors
        self.error_sites = [] if error_sites is None else error_sites
        self.record_bytes = record_bytes
        self.top_error = top_error
        self.asked_wait_ms = asked_wait_ms
        self.asked_wait_field = asked_wait_field
        self.throttle_ms = throttle_ms
        self.leads_sync = leads_sync

    def text(self) -> str:
        parts = []
        topics = self.topics
        if topics:
            shown: list[str] = []
            for t, ps in topics.items():
                if len(shown) == 3:
                    break
                if t.startswith(UNRESOLVED):
                    t = t[: len(UNRESOLVED) + 8]
                if len(ps) == 1:  # (most lines: one partition, no sort, no join)
                    for p in ps:
                        shown.append(f"{t}[{p}]")
                elif ps:
                    shown.append(
                        f"{t}[{','.join(map(str, sorted(ps)[:6]))}{',…' if len(ps) > 6 else ''}]"
                    )
                else:
                    shown.append(t)
            more = f" +{len(topics) - 3}" if len(topics) > 3 else ""
            parts.append(" ".join(shown) + more)
        if self.records:
            parts.append(f"{self.records} record{'s' if self.records != 1 else ''}")
        if self.errors:
            parts.append(self.error_text())
        return "  ".join(parts)

    def error_text(self) -> str:
        """The names of the errors, as the summary line shows them."""
        return ",".join(sorted({error_name(c) for c in self.errors}))


_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
UNRESOLVED = "topic-id:"  # prefix of a topic known only by its id


def topic_of_id(topic_id: str, ids: dict[str, str]) -> str:
    """A topic known by its id: its name if ``ids`` (or KRaft's fixed id of
    __cluster_metadata) gives it, else ``topic-id:`` and the id."""
    return ids.get(topic_id) or (
        "__cluster_metadata" if topic_id == METADATA_TOPIC_ID else f"{UNRESOLVED}{topic_id}"
    )


def facts(
    *trees: Node | dict[Any, Any] | None,
    topic_ids: dict[str, str] | None = None,
    plans: Sequence[Any] = (),
) -> Facts:
    """What ``trees`` touch (located trees, or bodies the values decoder read as dicts:
    the same walk). ``topic_ids`` (topic id -> name) is learned from messages
    that carry both (Metadata, CreateTopics...) and names topics that only have an id
    (Fetch v13+): pass the same dict for a whole capture. Topics it cannot name are
    ``topic-id:`` and the whole id (``Facts.text`` shows its first 8 digits).
    ``plans``, beside ``trees``: each dict body's ``body_plan`` (none: walk it whole)."""
    f = Facts()
    ids = topic_ids if topic_ids is not None else {}
    for i, tree in enumerate(trees):
        if tree is None:
            continue
        if isinstance(tree, dict):  # a body the values decoder read
            plan = plans[i] if i < len(plans) else GENERIC
            if plan is GENERIC:
                _collect_values(tree, f, None, "", ids, False)
            elif type(plan) is tuple:
                _collect_planned(tree, plan, f, None, ids)
            elif plan is not None:  # compiled (native/src/facts.rs)
                plan.walk(tree, f, ids)
        else:
            _collect(tree, f, None, "", ids)
    return f


def pair_facts(
    request: Node | dict[Any, Any] | None,
    response: Node | dict[Any, Any] | None,
    plans: Sequence[Any],
    topic_ids: dict[str, str],
) -> Facts:
    """``facts(request, response, topic_ids=topic_ids, plans=plans)`` (``plans``: two)
    without its loop and keywords (enrichment's call per exchange: the general one's
    arguments and loop cost as much as the walks of most bodies)."""
    f = Facts()
    p0, p1 = plans
    # (_facts_of's usual case inline: dict bodies and compiled plans, both in one call)
    if (
        type(p0) is _COMPILED_PLAN
        and type(p1) is _COMPILED_PLAN
        and type(request) is dict
        and type(response) is dict
    ):
        p0.walk_pair(request, p1, response, f, topic_ids)
        return f
    if request is not None:
        plan = p0
        if type(plan) is _COMPILED_PLAN and type(request) is dict:
            plan.walk(request, f, topic_ids)
        else:
            _facts_of(request, plan, f, topic_ids)
    if response is not None:
        plan = p1
        if type(plan) is _COMPILED_PLAN and type(response) is dict:
            plan.walk(response, f, topic_ids)
        else:
            _facts_of(response, plan, f, topic_ids)
    return f


class _NotCompiled:
    """What no plan is: the compiled plans' type where the extension is not at hand."""


# the compiled plans' type (compiled_plan): pair_facts walks them inline
_COMPILED_PLAN: Any = bind(__name__, "_COMPILED_PLAN", "FactsPlan", _NotCompiled)


def _facts_of(tree: Node | dict[Any, Any], plan: Any, f: Facts, ids: dict[str, str]) -> None:
    """What ``facts`` does with one tree and its plan."""
    if isinstance(tree, dict):
        if plan is GENERIC:
            _collect_values(tree, f, None, "", ids, False)
        elif type(plan) is tuple:
            _collect_planned(tree, plan, f, None, ids)
        elif plan is not None:
            plan.walk(tree, f, ids)
    else:
        _collect(tree, f, None, "", ids)


def _is_topic_array(name: str) -> bool:
    return "topic" in name or name in ("responses", "partition_data")


def _collect(node: Node, f: Facts, topic: str | None, array: str, ids: dict[str, str]) -> None:
    """Walk ``node``; ``array`` is the name of the array ``node`` is an element of."""
    element = node.name.startswith("[")
    if element:
        name = topic_id = None
        for c in node.children:
            if (
                c.ktype == "string"
                and isinstance(c.value, str)
                and (
                    c.name in ("topic", "topic_name")
                    or (c.name == "name" and _is_topic_array(array))
                )
            ):
                name = c.value
            elif c.ktype == "uuid" and c.name == "topic_id":
                topic_id = c.value
        topic = _element_topic(name, topic_id, ids, f, topic)
    partition = None
    for c in node.children:
        kind = c.ktype
        if (
            kind == "int32"
            and element
            and topic is not None
            and c.value is not None
            and c.name in ("partition_index", "partition", "index")
        ):
            f.topics[topic].add(c.value)
            partition = c.value
        elif kind == "int16" and c.name.endswith("error_code") and c.value:
            f.errors.append(c.value)
            f.error_sites.append((topic, partition, c.value))
        elif kind == "records" and node.ktype != "record_batch" and c.value is not None:
            f.record_bytes += c.length
        elif kind == "record":
            f.records += 1
            continue
        elif kind == "record_batch" and not any(n.ktype == "record" for n in c.walk()):
            count = c.child("record_count")  # a summary decode: trust the header
            f.records += count.value if count is not None and count.value else 0
            continue
        elif kind.startswith("message_v"):
            attrs = c.child("attributes")
            if attrs is not None and attrs.value is not None and attrs.value & 7 == 0:
                f.records += 1
        if c.children:
            _collect(c, f, topic, c.name if kind == "array" else array, ids)


def _element_topic(
    name: str | None, topic_id: Any, ids: dict[str, str], f: Facts, topic: str | None
) -> str | None:
    """The topic an array element names (by name, or by id through ``ids``, which an
    element carrying both teaches), noted in ``f``; else ``topic`` (its parent's). The
    values' ``topic_id`` as it stands: a zero id names no topic."""
    if not isinstance(topic_id, str) or topic_id == _ZERO_UUID:
        topic_id = None
    if name is not None and topic_id is not None:
        ids[topic_id] = name
    elif name is None and topic_id is not None:
        name = topic_of_id(topic_id, ids)
    if name is None:
        return topic
    f.topics.setdefault(name, set())  # (an empty name is a name)
    return name


def _collect_values(
    d: dict[Any, Any], f: Facts, topic: str | None, array: str, ids: dict[str, str], element: bool
) -> None:
    if element:
        name = None
        if "topic" in d or "topic_name" in d or "name" in d:
            for k in _NAME_KEYS:
                v = d.get(k)
                if isinstance(v, str) and (k != "name" or _is_topic_array(array)):
                    if name is not None:  # two names: the later one, as _collect
                        name = _last_name(d, array)
                        break
                    name = v
        topic_id = d.get("topic_id")
        if name is not None or topic_id is not None:
            topic = _element_topic(name, topic_id, ids, f, topic)
    partition = None
    for k, v in d.items():
        kind = type(v)
        if kind is int:
            role = _INT_ROLES.get(k)
            if role is None:
                role = _int_role(k)
            if role == _PARTITION:
                if element and topic is not None:
                    f.topics[topic].add(v)
                    partition = v
            elif role == _ERROR and v:
                f.errors.append(v)
                f.error_sites.append((topic, partition, v))
        elif kind is list:
            for item in v:
                if type(item) is dict:
                    _collect_values(item, f, topic, k, ids, True)
        elif kind is dict:
            _collect_values(v, f, topic, array, ids, False)
        elif kind is BatchHeads:  # a records field read for a summary
            f.record_bytes += v.size
            for batch in v:
                f.records += batch["record_count"] or 0


# what an integer field is to the facts, by its name (a body's keys are its schema's
# field names: a few hundred, told once each instead of a string test per field)
_OTHER, _PARTITION, _ERROR = 0, 1, 2
_INT_ROLES: dict[str, int] = {}


def _int_role(key: str) -> int:
    role = (
        _PARTITION if key in _PARTITION_KEYS else _ERROR if key.endswith("error_code") else _OTHER
    )
    if len(_INT_ROLES) < 4096:  # unknown tags' keys (tag_N) are unbounded
        _INT_ROLES[key] = role
    return role


_NAME_KEYS = ("topic", "topic_name", "name")
_PARTITION_KEYS = frozenset({"partition_index", "partition", "index"})


def _last_name(d: dict[Any, Any], array: str) -> str | None:
    """An element's topic name when several keys could give it: the last of them."""
    name = None
    for k, v in d.items():
        if isinstance(v, str) and (
            k in ("topic", "topic_name") or (k == "name" and _is_topic_array(array))
        ):
            name = v
    return name


# -- plans: the fields of a layout the facts read ------------------------------------------
#
# _collect_values looks at every key of every dict of a body; a plan, made once per
# message kind from its layout, lists only the fields that can teach a fact (topic names
# and ids, partitions, error codes, records, and the structs holding them), in the
# order _collect_values meets them (wire order, then tagged fields), so the answer is
# the same. On a KRaft cluster's traffic, where most bodies hold a few such fields
# among many, the walk cost most of the summary's facts.

GENERIC: Any = "generic"  # walk the dict whole (_collect_values)
_LIST, _DICT, _REC = 3, 4, 5
_UNSET = object()
_BODY_PLANS: dict[tuple[int, int, str], Any] = {}
forget_on_change(_BODY_PLANS.clear)


def body_plan(api_key: int, api_version: int, direction: str) -> Any:
    """The plan of a body the values decoder read for this message kind (None: no fact
    in it; GENERIC: no plan, walk it whole), compiled when the extension is at hand
    (``compiled_plan``)."""
    key = (api_key, api_version, direction)
    plan = _BODY_PLANS.get(key, _UNSET)
    if plan is _UNSET:
        python = python_plan(api_key, api_version, direction)
        plan = _BODY_PLANS[key] = compiled_plan(python) or python
    return plan


def python_plan(api_key: int, api_version: int, direction: str) -> Any:
    """``body_plan``'s plan as ``_collect_planned`` walks it (the reference)."""
    st = schemas.layout(api_key, api_version, direction)
    return GENERIC if st is None else _plan(st, "", False)


def compiled_plan(plan: Any) -> Any | None:
    """``plan`` as ``kdissect._native.FactsPlan`` (its ``walk(body, facts, ids)`` is
    ``_collect_planned``'s, a few times cheaper: on a KRaft cluster's traffic the Python
    walk was a twelfth of the summary's CPU), or None: no extension, ``KDISSECT_PURE``,
    or nothing to walk. ``_collect_planned`` stays the reference
    (tests/test_dense_paths.py compares the two)."""
    if type(plan) is not tuple:
        return None
    ext = chosen()
    cls = getattr(ext, "FactsPlan", None) if ext is not None else None
    if cls is None:
        return None
    return cls(
        plan, GENERIC, _collect_values, BatchHeads, _ZERO_UUID, METADATA_TOPIC_ID, UNRESOLVED
    )


def _plan(st: Struct, array: str, element: bool) -> Any:
    """(element, name keys, has topic_id, items) of ``st`` read as an element of the
    array ``array`` (or not); None when nothing in it teaches a fact."""
    names: list[str] = []
    topic_id = False
    items: list[tuple[str, int, Any, str]] = []
    tagged = 0  # tagged fields that matter: their order is the wire's
    for fl in st.fields + st.tagged:
        if fl.name.startswith("_"):  # not kept by the values readers
            continue
        if fl.array:
            sub = _plan(fl.struct, fl.name, True) if fl.struct is not None else None
            if sub is None:
                continue
            items.append((fl.name, _LIST, sub, fl.name))
        elif fl.struct is not None:
            sub = _plan(fl.struct, array, False)
            if sub is None:
                continue
            items.append((fl.name, _DICT, sub, array))
        elif fl.type == "records":
            items.append((fl.name, _REC, None, array))
        elif element and (
            fl.name in ("topic", "topic_name") or (fl.name == "name" and _is_topic_array(array))
        ):
            names.append(fl.name)
        elif element and fl.name == "topic_id":
            topic_id = True
        else:
            role = _int_role(fl.name)
            if not (role == _ERROR or (role == _PARTITION and element)):
                continue
            items.append((fl.name, role, None, array))
        tagged += fl.tag is not None
    if tagged > 1:
        return GENERIC
    if not names and not topic_id and not items:
        return None
    return element, tuple(names), topic_id, tuple(items)


def _collect_planned(
    d: dict[Any, Any], plan: tuple[Any, ...], f: Facts, topic: str | None, ids: dict[str, str]
) -> None:
    """_collect_values of ``d`` through its plan."""
    element, names, has_id, items = plan
    if element:
        name = None
        for k in names:  # several: the last, as _collect_values
            v = d.get(k)
            if isinstance(v, str):
                name = v
        topic_id = d.get("topic_id") if has_id else None
        if name is not None or topic_id is not None:
            topic = _element_topic(name, topic_id, ids, f, topic)
    partition = None
    for k, op, sub, array in items:
        v = d.get(k)
        if v is None:
            continue
        if op == _ERROR:
            if type(v) is int and v:
                f.errors.append(v)
                f.error_sites.append((topic, partition, v))
        elif op == _PARTITION:
            if type(v) is int and topic is not None:
                f.topics[topic].add(v)
                partition = v
        elif op == _LIST:
            if type(v) is list:
                for item in v:
                    if type(item) is dict:
                        if sub is GENERIC:
                            _collect_values(item, f, topic, k, ids, True)
                        else:
                            _collect_planned(item, sub, f, topic, ids)
        elif op == _DICT:
            if type(v) is dict:
                if sub is GENERIC:
                    _collect_values(v, f, topic, array, ids, False)
                else:
                    _collect_planned(v, sub, f, topic, ids)
        elif type(v) is BatchHeads:  # _REC: a records field read for a summary
            f.record_bytes += v.size
            for batch in v:
                f.records += batch["record_count"] or 0
        else:  # records read otherwise: the whole walk
            _collect_values({k: v}, f, topic, array, ids, False)


SUMMARY = Options(records="batches")  # a summary reads record batch headers, not records
