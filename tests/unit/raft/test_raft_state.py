"""Quorum state stores: durable, atomic, and loud about corruption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pydmq.raft.state import FileQuorumStateStore, MemoryQuorumStateStore, QuorumState


def test_file_store_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "meta" / "quorum-state"
    store = FileQuorumStateStore(str(path))
    assert store.read() == QuorumState()
    store.write(QuorumState(epoch=4, voted_id=2, leader_id=None))
    assert FileQuorumStateStore(str(path)).read() == QuorumState(4, 2, None)
    store.write(QuorumState(epoch=5, voted_id=None, leader_id=3))
    assert FileQuorumStateStore(str(path)).read() == QuorumState(5, None, 3)
    doc = json.loads(path.read_text())
    assert doc == {"data_version": 0, "leader_epoch": 5, "leader_id": 3, "voted_id": -1}
    assert not (tmp_path / "meta" / "quorum-state.tmp").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b'{"data_version": 9, "leader_epoch": 1, "leader_id": -1, "voted_id": -1}',
        b'{"data_version": 0, "leader_epoch": -1, "leader_id": -1, "voted_id": -1}',
        b'{"data_version": 0, "leader_epoch": 1, "leader_id": "x", "voted_id": -1}',
        b'{"data_version": 0, "leader_epoch": 1}',
        b"[]",
    ],
)
def test_file_store_refuses_corrupt_state(tmp_path: Path, content: bytes) -> None:
    """Starting fresh on a corrupt file could vote twice in one epoch: fail instead."""
    path = tmp_path / "quorum-state"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="corrupt quorum state"):
        FileQuorumStateStore(str(path)).read()


def test_memory_store_counts_writes() -> None:
    store = MemoryQuorumStateStore()
    store.write(QuorumState(1, 1, None))
    assert store.read() == QuorumState(1, 1, None) and store.writes == 1
