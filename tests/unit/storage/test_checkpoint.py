from __future__ import annotations

from pathlib import Path

from pydmq.storage.checkpoint import (
    read_checkpoint_file,
    read_offset_checkpoint,
    write_atomically,
    write_offset_checkpoint,
)


def test_write_atomically_replaces_content(tmp_path: Path) -> None:
    path = str(tmp_path / "hw")
    assert read_checkpoint_file(path) is None
    write_atomically(path, b"one")
    write_atomically(path, memoryview(b"two!"))
    assert read_checkpoint_file(path) == b"two!"
    assert [p.name for p in tmp_path.iterdir()] == ["hw"]  # no temp file left behind


def test_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    path = str(tmp_path / "recovery")
    assert read_offset_checkpoint(path) is None
    write_offset_checkpoint(path, 2**40 + 7, durable=False)
    assert read_offset_checkpoint(path) == 2**40 + 7
    (tmp_path / "recovery").write_bytes(b"torn")
    assert read_offset_checkpoint(path) is None
