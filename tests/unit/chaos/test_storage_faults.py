"""The chaos harness's storage-fault tools: a node's own tmpfs filled to the last byte and
freed, its failpoint file, and a damaged segment (the runs themselves: tests/interop/test_chaos.py).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from pydmq.chaos.faults import EIO_FAILPOINTS, FAULT_KINDS, STORAGE_FAULT_KINDS
from pydmq.chaos.storage import (
    DAMAGE_BYTES,
    NodeDisk,
    NodeFailpoints,
    damage_segment,
    storage_faults_unavailable,
)
from pydmq.failpoints import FILE_ENV_VAR, parse_faults

needs_root = pytest.mark.skipif(
    storage_faults_unavailable() is not None, reason=str(storage_faults_unavailable())
)


@needs_root
def test_a_node_disk_fills_to_the_last_byte_and_frees(tmp_path: Path) -> None:
    disk = NodeDisk(tmp_path / "node-1", 8)
    disk.mount()
    try:
        (disk.path / "data").write_bytes(b"x" * 100_000)
        filled = disk.fill()
        assert disk.free_bytes() == 0
        assert 7 * 2**20 < filled + 100_000 <= 8 * 2**20
        with pytest.raises(OSError) as full, open(disk.path / "more", "wb") as f:
            f.write(b"y" * 4096)
            f.flush()
        assert full.value.errno == 28  # ENOSPC, as a broker on that disk meets it
        disk.free()
        assert disk.free_bytes() > 7 * 2**20
        assert (disk.path / "data").read_bytes() == b"x" * 100_000  # nothing else touched
    finally:
        disk.unmount()
    assert not disk.mounted and not os.path.ismount(disk.path)


def test_failpoint_file_arms_what_the_eio_kinds_name(tmp_path: Path) -> None:
    points = NodeFailpoints(tmp_path / "failpoints-node-2")
    assert points.env == {FILE_ENV_VAR: str(points.path)}
    for spec in EIO_FAILPOINTS.values():
        points.write(spec)
        assert parse_faults(points.path.read_text(), FILE_ENV_VAR)  # a valid, armed spec
    points.clear()
    assert points.path.read_text() == ""
    assert set(EIO_FAILPOINTS) <= set(STORAGE_FAULT_KINDS) <= set(FAULT_KINDS)


def test_damage_zeroes_bytes_inside_a_segment(tmp_path: Path) -> None:
    partition = tmp_path / "t-0"
    partition.mkdir()
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(bytes(range(256)) * 40)
    (partition / "00000000000000000123.log").write_bytes(b"tiny")  # too small to damage
    damage = damage_segment(tmp_path, "t", 0, random.Random(7))
    assert damage is not None and damage.file == segment
    data = segment.read_bytes()
    assert len(data) == 256 * 40
    assert data[damage.position : damage.position + DAMAGE_BYTES] == bytes(DAMAGE_BYTES)
    assert len(data) // 4 <= damage.position <= 3 * len(data) // 4
    assert damage_segment(tmp_path, "other", 0, random.Random(7)) is None
