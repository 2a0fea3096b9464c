"""A Jepsen-style fault-injection harness for a pydmq cluster (``pydmq chaos``).

A run starts N node processes on loopback, every listener behind a link-controlling TCP proxy
(:mod:`.proxy`); idempotent acks=all producers write self-checking values (:mod:`.history`),
assigned readers and a consumer group read them back, and the nemesis (:mod:`.faults`) kills,
pauses and isolates nodes and clients while they run. After healing, every partition is drained
from offset 0, the replicas are compared offline and the checker (:mod:`.checker`) reports
lost, duplicated, reordered and inconsistent writes, consumer skips and recovery times.

The harness needs confluent-kafka, the ``chaos`` extra: ``pip install 'pydmq[chaos]'``.
"""

from __future__ import annotations

import importlib

__all__ = ["missing_dependency"]

# What the harness's clients import (each where it is used, inside their processes).
_DEPENDENCIES = ("confluent_kafka",)


def missing_dependency() -> str | None:
    """The first module of the ``chaos`` extra that cannot be imported here, or None.

    Checked by ``pydmq chaos`` before it starts any node: the clients import it only once
    the cluster runs."""
    for name in _DEPENDENCIES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            return exc.name or name
    return None
