"""A Jepsen-style fault-injection harness for a pydmq cluster (``pydmq chaos``).

A run starts N node processes on loopback, every listener behind a link-controlling TCP proxy
(:mod:`.proxy`); idempotent acks=all producers write self-checking values (:mod:`.history`),
assigned readers and a consumer group read them back, and the nemesis (:mod:`.faults`) kills,
pauses and isolates nodes and clients while they run. After healing, every partition is drained
from offset 0, the replicas are compared offline and the checker (:mod:`.checker`) reports
lost, duplicated, reordered and inconsistent writes, consumer skips and recovery times.

The harness needs confluent-kafka (a test dependency): ``pip install -e '.[test]'``.
"""
