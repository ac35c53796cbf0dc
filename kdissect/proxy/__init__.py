"""The man-in-the-middle proxy: Kafka clients connect to it, it connects to the brokers,
forwards every byte, rewrites the broker addresses responses hand out (so clients stay
on the proxy), and hands what passes, through a channel bounded in bytes, to a display
process that decodes it with the stream layer."""
