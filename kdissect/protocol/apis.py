"""The API table: what kdissect knows about each Kafka API beyond its layout.

One row per API key (one line each, so that adding an API or a property is one edit):
its name as Kafka spells it, and the properties that other stages act on — which
direction carries record batches, whether its ``bytes`` fields hold embedded structures
(consumer protocol, SASL tokens), whether its answers teach topic ids or name brokers,
which request fields ask the broker to wait, whether it is part of SASL, which enum its
resource types are. Every module asks
this table (or the sets derived from it below) instead of writing API keys by number.
"""

from __future__ import annotations

from typing import Any

from .plain import Frozen


class Api(Frozen):
    """One API's row (a plain class, not a dataclass: start-up, see plain.py)."""

    __slots__ = _fields = (
        "key",
        "name",
        "records",
        "embedded",
        "teaches_topic_ids",
        "names_brokers",
        "waits",
        "sasl",
        "resources",
    )

    def __init__(
        self,
        key: int,
        name: str,
        records: str = "",  # "request"/"response": the direction carrying record batches
        embedded: bool = False,  # bytes fields hold structures (consumer protocol, SASL tokens)
        teaches_topic_ids: bool = False,  # its messages carry topic names with their ids
        names_brokers: bool = False,  # its responses carry broker host:port (the proxy rewrites them)
        waits: tuple[
            str, ...
        ] = (),  # request fields asking the broker to hold the answer (first found)
        sasl: bool = False,  # part of SASL authentication
        # the enum its resource_type fields' numbers are (a hint, context.py): "config"
        # (ConfigResource.Type) or "acl" (ACLs' ResourceType): the same name, two enums
        resources: str = "",
    ):
        self.key, self.name, self.records, self.embedded = key, name, records, embedded
        self.teaches_topic_ids, self.names_brokers = teaches_topic_ids, names_brokers
        self.waits, self.sasl, self.resources = waits, sasl, resources


TABLE: dict[int, Api] = {}


def api(key: int, name: str, **properties: Any) -> Api:
    """Register one API (the table below; one line per API)."""
    assert key not in TABLE, f"API key {key} registered twice"
    TABLE[key] = row = Api(key, name, **properties)
    return row


PRODUCE = api(0, "Produce", records="request", names_brokers=True).key
FETCH = api(1, "Fetch", records="response", names_brokers=True, waits=("max_wait_ms",)).key
api(2, "ListOffsets")
METADATA = api(3, "Metadata", teaches_topic_ids=True, names_brokers=True).key
api(4, "LeaderAndIsr")
api(5, "StopReplica")
api(6, "UpdateMetadata")
CONTROLLED_SHUTDOWN = api(7, "ControlledShutdown").key
OFFSET_COMMIT = api(8, "OffsetCommit").key
api(9, "OffsetFetch")
FIND_COORDINATOR = api(10, "FindCoordinator", names_brokers=True).key
JOIN_GROUP = api(
    11, "JoinGroup", embedded=True, waits=("rebalance_timeout_ms", "session_timeout_ms")
).key
HEARTBEAT = api(12, "Heartbeat").key
LEAVE_GROUP = api(13, "LeaveGroup").key
SYNC_GROUP = api(14, "SyncGroup", embedded=True).key
DESCRIBE_GROUPS = api(15, "DescribeGroups", embedded=True).key
api(16, "ListGroups")
SASL_HANDSHAKE = api(17, "SaslHandshake", sasl=True).key
API_VERSIONS = api(18, "ApiVersions").key
CREATE_TOPICS = api(19, "CreateTopics", teaches_topic_ids=True).key
api(20, "DeleteTopics", teaches_topic_ids=True)
api(21, "DeleteRecords")
INIT_PRODUCER_ID = api(22, "InitProducerId").key
api(23, "OffsetForLeaderEpoch")
api(24, "AddPartitionsToTxn")
api(25, "AddOffsetsToTxn")
END_TXN = api(26, "EndTxn").key
api(27, "WriteTxnMarkers")
api(28, "TxnOffsetCommit")
api(29, "DescribeAcls", resources="acl")
api(30, "CreateAcls", resources="acl")
api(31, "DeleteAcls", resources="acl")
DESCRIBE_CONFIGS = api(32, "DescribeConfigs", resources="config").key
ALTER_CONFIGS = api(33, "AlterConfigs", resources="config").key
api(34, "AlterReplicaLogDirs")
api(35, "DescribeLogDirs")
SASL_AUTHENTICATE = api(36, "SaslAuthenticate", embedded=True, sasl=True).key
api(37, "CreatePartitions")
CREATE_DELEGATION_TOKEN = api(38, "CreateDelegationToken").key
RENEW_DELEGATION_TOKEN = api(39, "RenewDelegationToken").key
EXPIRE_DELEGATION_TOKEN = api(40, "ExpireDelegationToken").key
DESCRIBE_DELEGATION_TOKEN = api(41, "DescribeDelegationToken").key
api(42, "DeleteGroups")
api(43, "ElectLeaders")
INCREMENTAL_ALTER_CONFIGS = api(44, "IncrementalAlterConfigs", resources="config").key
api(45, "AlterPartitionReassignments")
api(46, "ListPartitionReassignments")
api(47, "OffsetDelete")
DESCRIBE_CLIENT_QUOTAS = api(48, "DescribeClientQuotas").key
ALTER_CLIENT_QUOTAS = api(49, "AlterClientQuotas").key
api(50, "DescribeUserScramCredentials")
ALTER_USER_SCRAM_CREDENTIALS = api(51, "AlterUserScramCredentials").key
VOTE = api(52, "Vote").key
BEGIN_QUORUM_EPOCH = api(53, "BeginQuorumEpoch").key
END_QUORUM_EPOCH = api(54, "EndQuorumEpoch").key
api(55, "DescribeQuorum")
api(56, "AlterPartition")
api(57, "UpdateFeatures")
ENVELOPE = api(58, "Envelope").key  # a forwarded request inside (message.py)
FETCH_SNAPSHOT = api(59, "FetchSnapshot").key  # its snapshot bytes: KRaft records (internal.py)
DESCRIBE_CLUSTER = api(60, "DescribeCluster", names_brokers=True).key
api(61, "DescribeProducers")
api(62, "BrokerRegistration")
BROKER_HEARTBEAT = api(63, "BrokerHeartbeat").key
api(64, "UnregisterBroker")
api(65, "DescribeTransactions")
api(66, "ListTransactions")
api(67, "AllocateProducerIds")
CONSUMER_GROUP_HEARTBEAT = api(68, "ConsumerGroupHeartbeat").key
api(69, "ConsumerGroupDescribe")
api(70, "ControllerRegistration")
api(71, "GetTelemetrySubscriptions")
api(72, "PushTelemetry")
api(73, "AssignReplicasToDirs")
api(74, "ListConfigResources", resources="config")
api(75, "DescribeTopicPartitions", teaches_topic_ids=True)
SHARE_GROUP_HEARTBEAT = api(76, "ShareGroupHeartbeat").key
api(77, "ShareGroupDescribe")
SHARE_FETCH = api(
    78, "ShareFetch", records="response", names_brokers=True, waits=("max_wait_ms",)
).key
api(79, "ShareAcknowledge", names_brokers=True)
api(80, "AddRaftVoter")
api(81, "RemoveRaftVoter")
api(82, "UpdateRaftVoter")
api(83, "InitializeShareGroupState")
api(84, "ReadShareGroupState")
api(85, "WriteShareGroupState")
api(86, "DeleteShareGroupState")
api(87, "ReadShareGroupStateSummary")
STREAMS_GROUP_HEARTBEAT = api(88, "StreamsGroupHeartbeat").key
STREAMS_GROUP_DESCRIBE = api(89, "StreamsGroupDescribe").key
api(90, "DescribeShareGroupOffsets")
api(91, "AlterShareGroupOffsets")
api(92, "DeleteShareGroupOffsets")
api(93, "StreamsGroupTopologyDescriptionUpdate")  # Kafka 4.4 (KIP-1331's topology push)
api(94, "UnregisterController")  # Kafka 4.4
# A newer release's keys are appended below by scripts/kafka/update (one line each, no
# properties: add those by hand where they apply).

# -- derived views (sets and dicts: these are asked per message) -------------------------
NAMES: dict[int, str] = {k: a.name for k, a in TABLE.items()}
RECORDS_IN: dict[int, str] = {k: a.records for k, a in TABLE.items() if a.records}
CARRY_RECORDS = frozenset(RECORDS_IN)
EMBEDDED = frozenset(k for k, a in TABLE.items() if a.embedded)
TEACHES_TOPIC_IDS = frozenset(k for k, a in TABLE.items() if a.teaches_topic_ids)
NAMES_BROKERS = frozenset(k for k, a in TABLE.items() if a.names_brokers)
WAIT_FIELDS: dict[int, tuple[str, ...]] = {k: a.waits for k, a in TABLE.items() if a.waits}
SASL = frozenset(k for k, a in TABLE.items() if a.sasl)
GROUP_MEMBERSHIP = frozenset({JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP})


def carries_records(api_key: int | None, direction: str) -> bool:
    """Whether a message of this API in this direction ("request"/"response") holds
    record batches."""
    return RECORDS_IN.get(api_key, "") == direction if api_key is not None else False
