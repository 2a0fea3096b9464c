"""KRaft-style Raft for the ``__cluster_metadata`` log: sans-IO core, log and quorum state.

Reading order: :mod:`.messages` (the RPCs), :mod:`.log` (entries, snapshots, the log port),
:mod:`.state` (durable epoch and vote), :mod:`.core` (the state machine a driver runs).
Nothing here does network I/O or uses asyncio; only :mod:`.file_log` and
:class:`.state.FileQuorumStateStore` touch files.

Import the modules themselves: this package imports none of them, so a single node, which
uses :mod:`.file_log` alone (its local metadata log), does not pay for the core at start-up.
"""
