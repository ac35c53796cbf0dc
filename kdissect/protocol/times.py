"""The instants kdissect writes as dates: from 1970 to 9999-12-31T23:59:59Z (what ISO 8601
and Python's datetime take). A capture time or a record's timestamp past it is damage and
is shown so (null, invalid), never as a date. The compiled copy: native/src/lib.rs
``LAST_SECOND``."""

LAST_SECOND = 253402300799  # 9999-12-31T23:59:59Z
LAST_MS = LAST_SECOND * 1000 + 999  # the same, in a Kafka timestamp's milliseconds
