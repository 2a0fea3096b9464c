"""pydmq: a broker and storage-engine library that speaks the Apache Kafka wire protocol."""

__version__ = "0.1.0"
__all__ = ["__version__"]
