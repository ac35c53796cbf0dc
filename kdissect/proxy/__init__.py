"""The man-in-the-middle proxy: Kafka clients connect to it, it connects to the brokers,
forwards every byte, rewrites the broker addresses responses hand out (so clients stay
on the proxy), and feeds what passes to the stream layer for decoding."""
