"""BrokerTopicStats: what this broker's partitions took in and gave out, per topic, as plain
ints (Kafka's BrokerTopicStats meters, and the ReplicaManager's ISR shrink/expand rates).

Incremented on the produce and fetch paths (one dict lookup and a few additions per partition
of a request), read only when ``/metrics`` is scraped (:mod:`pydmq.metrics`). Counters only
grow; a topic's entry goes with the topic (:meth:`BrokerTopicStats.remove_topic`).
"""

from __future__ import annotations

__all__ = ["BrokerTopicStats", "TopicStats"]


class TopicStats:
    """One topic's counters (Kafka's MessagesInPerSec, BytesInPerSec, BytesOutPerSec and
    ReplicationBytesOutPerSec, as totals)."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.messages_in = 0  # records appended as leader (produce, coordinators' writes)
        self.bytes_in = 0  # their batches' bytes
        self.bytes_out = 0  # record bytes answered to consumers' fetches
        self.replication_bytes_out = 0  # record bytes answered to followers' fetches


class BrokerTopicStats:
    """The topics' counters and the broker-wide ISR change counts. Owned by the event loop
    (the replica manager's)."""

    __slots__ = ("isr_expands", "isr_shrinks", "topics")

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.isr_shrinks = 0  # ISR changes committed that removed replicas (leader side)
        self.isr_expands = 0  # ISR changes committed that added replicas (leader side)

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def record_append(self, topic: str, records: int, size: int) -> None:
        stats = self.topic(topic)
        stats.messages_in += records
        stats.bytes_in += size

    def record_isr_change(self, old: list[int], new: list[int]) -> None:
        """A committed ISR change of a partition this broker leads."""
        if set(old) - set(new):
            self.isr_shrinks += 1
        if set(new) - set(old):
            self.isr_expands += 1

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)
