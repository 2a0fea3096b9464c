"""BrokerTopicStats: ISR changes are told apart as Kafka's meters count them."""

from __future__ import annotations

from pydmq.replication.stats import BrokerTopicStats


def test_isr_changes_count_shrinks_and_expansions() -> None:
    stats = BrokerTopicStats()
    stats.record_isr_change([1, 2, 3], [1, 2])  # shrink
    stats.record_isr_change([1, 2], [1, 2, 3])  # expansion
    stats.record_isr_change([1, 2], [1, 3])  # one out, one in: both
    stats.record_isr_change([1, 2], [2, 1])  # same members: neither
    assert (stats.isr_shrinks, stats.isr_expands) == (2, 2)


def test_appends_per_topic() -> None:
    stats = BrokerTopicStats()
    stats.record_append("a", 10, 1000)
    stats.record_append("a", 5, 500)
    stats.record_append("b", 1, 70)
    assert (stats.topic("a").messages_in, stats.topic("a").bytes_in) == (15, 1500)
    assert stats.topic("b").messages_in == 1
    stats.remove_topic("a")
    assert "a" not in stats.topics
