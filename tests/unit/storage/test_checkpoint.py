from __future__ import annotations

from pathlib import Path

import pytest

from pydmq.storage import checkpoint
from pydmq.storage.checkpoint import (
    make_dirs_durably,
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


def test_read_checkpoint_file_reads_large_and_empty_files(tmp_path: Path) -> None:
    big = bytes(range(256)) * 1000  # several read chunks
    write_atomically(str(tmp_path / "big"), big)
    assert read_checkpoint_file(str(tmp_path / "big")) == big
    (tmp_path / "empty").write_bytes(b"")
    assert read_checkpoint_file(str(tmp_path / "empty")) == b""


def test_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    path = str(tmp_path / "recovery")
    assert read_offset_checkpoint(path) is None
    write_offset_checkpoint(path, 2**40 + 7, durable=False)
    assert read_offset_checkpoint(path) == 2**40 + 7
    (tmp_path / "recovery").write_bytes(b"torn")
    assert read_offset_checkpoint(path) is None


def test_make_dirs_durably_fsyncs_the_parent_of_each_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    monkeypatch.setattr(checkpoint, "fsync_dir", synced.append)
    make_dirs_durably(str(tmp_path / "a" / "b"))
    assert (tmp_path / "a" / "b").is_dir()
    assert synced == [str(tmp_path), str(tmp_path / "a")]
    synced.clear()
    make_dirs_durably(str(tmp_path / "a" / "b"))
    assert synced == []
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(FileExistsError):
        make_dirs_durably(str(tmp_path / "file"))
