"""Partition admission: how many partitions one request may create and one node may host.

Pure rules of the controller's operations (:mod:`pydmq.controller.operations.topics`), which a
cluster's active controller and a single node's own both run, so both modes refuse the same
requests with the same words. Both limits answer POLICY_VIOLATION: the count itself is valid
(INVALID_PARTITIONS stays for counts that are wrong in themselves: not positive, or not above
a topic's current count); what refuses it is a limit of this deployment, Kafka's
PolicyViolationException case.

* **Per request** (:data:`MAX_PARTITIONS_PER_REQUEST`): Kafka's controller refuses an operation
  that would generate more than 10,000 records (``QuorumController.MAX_RECORDS_PER_USER_OP``)
  with PolicyViolationException "Unable to perform excessively large batch operation."; we
  count partitions, across the topics of one CreateTopics or CreatePartitions request. It
  bounds the work of one request everywhere: one controller operation is one Raft entry, and
  every broker opens the new partitions it is sent in one LeaderAndIsr pass.
* **Per node** (``pydmq.max.broker.partitions``, after KIP-578's ``max.broker.partitions``,
  which Kafka never shipped): the partition replicas one node may host, counting those it
  hosts already. What a node can hold is bounded by memory and start-up time, not by open
  files (segment files are opened lazily under a budget); the default is set from the
  figures measured in ARCHITECTURE.md.
"""

from __future__ import annotations

__all__ = ["MAX_PARTITIONS_PER_REQUEST", "broker_limit_problem", "request_limit_problem"]

MAX_PARTITIONS_PER_REQUEST = 10_000


def request_limit_problem(adding: int, earlier: int) -> str | None:
    """Why a topic adding ``adding`` partitions to a request that created ``earlier`` already
    is refused, or None."""
    if earlier + adding <= MAX_PARTITIONS_PER_REQUEST:
        return None
    so_far = f" after {earlier} earlier in this request" if earlier else ""
    return (
        f"Unable to perform excessively large batch operation: {adding} partitions{so_far} "
        f"exceed the limit of {MAX_PARTITIONS_PER_REQUEST} partitions per request; create "
        "them with several requests."
    )


def broker_limit_problem(broker_id: int, hosted: int, adding: int, limit: int) -> str | None:
    """Why giving broker ``broker_id`` (hosting ``hosted`` partitions) ``adding`` more is
    refused under ``pydmq.max.broker.partitions`` = ``limit``, or None."""
    if hosted + adding <= limit:
        return None
    return (
        f"Broker {broker_id} hosts {hosted} partitions; {adding} more would exceed its limit of "
        f"{limit} (pydmq.max.broker.partitions)."
    )
