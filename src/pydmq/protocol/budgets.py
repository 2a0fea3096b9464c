"""Decode budgets: how many elements one request may make the decoder build, per API key.

Sans-IO table read by the request dispatcher. An element is one array entry (a struct, a
string, a number) or one tagged field; each count is charged when it is read, before any
element is built (:class:`~pydmq.protocol.primitives.Reader`). The bytes alone bound nothing
useful: one empty Produce topic entry is 3-6 bytes and costs ~5-10 us to decode and answer on
a 2-core VM, so a 100 MiB frame could hold ~35 M of them (measured before the budgets: 10 MiB
held the event loop 37.7 s and took 1.4 GB, linearly; 100 MiB: ~6 minutes and ~13 GB).

Each budget is sized from what real clients legitimately send, with margin, and from what the
node can do for one request within the stall target (no connection kept waiting 1 s, on the
machine of DESIGN.md §8). At ~3-6 us to decode and a few us to handle and encode each element,
100,000 elements are ~0.5-1 s of one core: requests past 10,000 elements are decoded and
encoded on the dispatcher's thread and handled in slices (see api/dispatcher.py and
broker/handlers/_slices.py), so the event loop is not held for the whole request. The largest
budgets are for the APIs where a legitimate request names every partition a big client deals
with:

===================================  ==========  ===============================================
API (key)                            budget      the largest legitimate request it allows
===================================  ==========  ===============================================
Fetch (1)                            110,000     a consumer or follower of 100,000 partitions
                                                 in 10,000 topics, plus forgotten topics (v7+)
ListOffsets (2)                      110,000     earliest/latest of 100,000 partitions (Spark
                                                 plans a batch with one request per broker)
OffsetCommit (8)                     110,000     a group committing 100,000 partitions
OffsetFetch (9)                      110,000     100,000 partition indexes (v8+ groups batch)
OffsetForLeaderEpoch (23)            110,000     validating 100,000 positions after a failover
DeleteRecords (21)                   110,000     truncating 100,000 partitions (Kafka Streams
                                                 purges repartition topics every commit)
Metadata (3)                         110,000     100,000 topic names (all topics is null)
DeleteTopics (20)                    110,000     100,000 topic names or ids
DescribeConfigs (32)                 110,000     100,000 resources, or fewer with key lists
                                                 (Kafka Connect, Cruise Control, admin tools)
DescribeTopicPartitions (75)         110,000     100,000 topic names
WriteTxnMarkers (27)                 110,000     a transaction coordinator's markers for one
                                                 leader: thousands of transactions completing
                                                 at once, each with its partitions
Produce (0)                          50,000      one batch for each of 50,000 partitions led
                                                 here (Kafka advises a few thousand per broker;
                                                 each batch is >= 61 bytes of records)
ElectLeaders (43), OffsetDelete      50,000      an admin operation over 50,000 partitions
(47), AlterPartitionReassignments
(45), ListPartitionReassignments
(46), ConsumerGroupHeartbeat (68),
DescribeProducers (61)
LeaderAndIsr (4), StopReplica (5),   500,000     our controller's FULL requests: every
UpdateMetadata (6)                               partition of a broker or of the cluster, each
                                                 with its replica and ISR lists (~70,000
                                                 partitions at replication factor 3)
AlterPartition (56)                  110,000     ISR changes of ~30,000 partitions at once
any other API                        10,000      group, admin and quorum requests (10,000
                                                 groups, members, topics to create, voters)
===================================  ==========  ===============================================

A request over its budget is refused before its elements are built: the dispatcher answers
INVALID_REQUEST when the API's response has a top-level error code in that version, else it
closes the connection (what Kafka does with a request it cannot parse).

The request header is decoded before its API key's budget applies: its tagged fields (Kafka
defines none in request header v2) get :data:`HEADER_DECODE_BUDGET`; past it the frame is
plainly hostile and its connection is closed.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

__all__ = ["DECODE_BUDGETS", "DEFAULT_DECODE_BUDGET", "HEADER_DECODE_BUDGET", "decode_budget"]

# Requests that legitimately name every partition a big consumer, follower or admin deals with.
_PARTITION_SCALE: Final = 110_000
# Our controller's FULL LeaderAndIsr/UpdateMetadata: every partition with its replica lists.
_CLUSTER_SCALE: Final = 500_000
# Requests over many partitions that are not sent for every partition of a cluster at once.
_ADMIN_SCALE: Final = 50_000

DEFAULT_DECODE_BUDGET: Final = 10_000
HEADER_DECODE_BUDGET: Final = 64

DECODE_BUDGETS: Final = MappingProxyType(
    {
        0: _ADMIN_SCALE,  # Produce
        1: _PARTITION_SCALE,  # Fetch
        2: _PARTITION_SCALE,  # ListOffsets
        3: _PARTITION_SCALE,  # Metadata
        4: _CLUSTER_SCALE,  # LeaderAndIsr
        5: _CLUSTER_SCALE,  # StopReplica
        6: _CLUSTER_SCALE,  # UpdateMetadata
        8: _PARTITION_SCALE,  # OffsetCommit
        9: _PARTITION_SCALE,  # OffsetFetch
        20: _PARTITION_SCALE,  # DeleteTopics
        21: _PARTITION_SCALE,  # DeleteRecords
        23: _PARTITION_SCALE,  # OffsetForLeaderEpoch
        27: _PARTITION_SCALE,  # WriteTxnMarkers
        32: _PARTITION_SCALE,  # DescribeConfigs
        43: _ADMIN_SCALE,  # ElectLeaders
        45: _ADMIN_SCALE,  # AlterPartitionReassignments
        46: _ADMIN_SCALE,  # ListPartitionReassignments
        47: _ADMIN_SCALE,  # OffsetDelete
        56: _PARTITION_SCALE,  # AlterPartition
        61: _ADMIN_SCALE,  # DescribeProducers
        68: _ADMIN_SCALE,  # ConsumerGroupHeartbeat
        75: _PARTITION_SCALE,  # DescribeTopicPartitions
    }
)


def decode_budget(api_key: int) -> int:
    """How many elements a request of ``api_key`` may make the decoder build."""
    return DECODE_BUDGETS.get(api_key, DEFAULT_DECODE_BUDGET)
