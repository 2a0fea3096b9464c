"""Topic set-up and offset snapshots with confluent-kafka (the pipeline's plain-client side)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def ensure_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0) -> None:
    """Create each topic (name -> partitions) unless it exists; wait until all are visible."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, num_partitions=n, replication_factor=1) for name, n in topics.items()]
    for name, fut in admin.create_topics(new, operation_timeout=timeout).items():
        try:
            fut.result(timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"cannot create topic {name}: {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10).topics
        if all(t in md and md[t].error is None and md[t].partitions for t in topics):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {sorted(topics)} not visible in the metadata")
        time.sleep(0.1)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> high watermark (the offset the next record will get)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pydmq-pipeline-offsets"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    finally:
        c.close()
