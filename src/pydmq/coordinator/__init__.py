"""The coordinator runtime: state kept in an internal topic's partitions, one shard each.

Shared by every coordinator whose state lives in an internal compacted topic (the group
coordinator over ``__consumer_offsets``; the transaction and share-group coordinators next).
:mod:`.api` is what a coordinator implements and what the runtime needs of the topic,
:mod:`.runtime` loads, serializes and commits, :mod:`.timer` fires per-shard timers through the
runtime, :mod:`.events` is the per-shard event queue.
"""
