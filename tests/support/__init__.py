"""Helpers shared by the interop tests: a tiny raw Kafka-protocol client built on our codecs."""
