"""Sources: where Kafka bytes come from (capture files, interfaces); each feeds the
stream engine and a sink."""
