"""Testing helpers for users and plugin authors: broker fixtures and the engine conformance suite."""

from pydmq.testing.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
