"""Layouts of internal-topic records that Kafka changed without a new version number.

KIP-848's consumer-group records shipped in Kafka 3.6 as an early-access preview ("this
schema is subject to non-backwards-compatible changes") and were rewritten in 3.7 at the
same version 0. A ``__consumer_offsets`` log written by 3.6 holds the old layouts, which
the generated (4.x) layouts misread (``internal_schemas``). internal.py tries these
when the current layout does not read a record cleanly, and says so. Written from Kafka
3.6.0's message definitions (group-coordinator's ConsumerGroupMemberMetadataValue and
ConsumerGroupCurrentMemberAssignmentValue), checked against what Kafka 3.6's classes
decode from such a log."""

EARLY_ACCESS = (
    "Kafka 3.6's early-access layout (KIP-848 preview; 3.7 changed it at the same version)"
)

BNF = """
ConsumerGroupMemberMetadataValue Record (Version: 0) => instance_id rack_id client_id client_host [subscribed_topic_names] subscribed_topic_regex rebalance_timeout_ms server_assignor [assignors] TAG_BUFFER
  instance_id => COMPACT_NULLABLE_STRING
  rack_id => COMPACT_NULLABLE_STRING
  client_id => COMPACT_STRING
  client_host => COMPACT_STRING
  subscribed_topic_names => COMPACT_STRING
  subscribed_topic_regex => COMPACT_NULLABLE_STRING
  rebalance_timeout_ms => INT32
  server_assignor => COMPACT_NULLABLE_STRING
  assignors => name minimum_version maximum_version reason version metadata TAG_BUFFER
    name => COMPACT_STRING
    minimum_version => INT16
    maximum_version => INT16
    reason => INT8
    version => INT16
    metadata => COMPACT_BYTES
ConsumerGroupCurrentMemberAssignmentValue Record (Version: 0) => member_epoch previous_member_epoch target_member_epoch [assigned_partitions] [partitions_pending_revocation] [partitions_pending_assignment] error metadata_version metadata_bytes TAG_BUFFER
  member_epoch => INT32
  previous_member_epoch => INT32
  target_member_epoch => INT32
  assigned_partitions => topic_id [partitions] TAG_BUFFER
    topic_id => UUID
    partitions => INT32
  partitions_pending_revocation => topic_id [partitions] TAG_BUFFER
    topic_id => UUID
    partitions => INT32
  partitions_pending_assignment => topic_id [partitions] TAG_BUFFER
    topic_id => UUID
    partitions => INT32
  error => INT8
  metadata_version => INT16
  metadata_bytes => COMPACT_BYTES
"""
