"""LocalMetadataLog snapshots are encoded and written off the caller's thread (the event loop).

The append that reaches ``metadata.log.max.snapshot.interval.records`` hands the image to the
``metadata-snapshot`` thread and returns; appends go on while it writes; the written snapshot
is adopted (the segments below it deleted) at the next append or at close, and a restart
replays the same image from it. A snapshot whose write fails is logged and taken again after
the next append.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from pydmq.controller import local_log
from pydmq.controller.local_log import LocalMetadataLog
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.image_codec import image_payloads
from pydmq.metadata.records import MetadataRecord, PartitionRecord, TopicRecord

pytestmark = pytest.mark.timeout(60)

Arm = Callable[[str], None]


def topic(name: str, partitions: int) -> list[MetadataRecord]:
    topic_id = uuid.uuid4()
    return [
        TopicRecord(name, topic_id),
        *(PartitionRecord(p, topic_id, (1,), (1,), (), (), 1, 0, 0, 0) for p in range(partitions)),
    ]


def checkpoints(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.checkpoint"))


def test_a_snapshot_is_written_on_its_own_thread_while_appends_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    threads: list[str] = []

    def held_payloads(image: MetadataImage) -> list[bytes]:
        threads.append(threading.current_thread().name)
        assert release.wait(10)
        return image_payloads(image)

    monkeypatch.setattr(local_log, "image_payloads", held_payloads)
    metadata_log = LocalMetadataLog(tmp_path, snapshot_interval_records=10)
    metadata_log.append(topic("a", 10))  # 11 records: a snapshot at offset 1 is taken
    metadata_log.append(topic("b", 2))  # returns while the snapshot thread is held
    assert threads and threads[0].startswith("metadata-snapshot")
    assert checkpoints(tmp_path) == []
    release.set()
    metadata_log.close()
    assert checkpoints(tmp_path) == ["00000000000000000001-0000000000.checkpoint"]

    reopened = LocalMetadataLog(tmp_path, snapshot_interval_records=10)
    assert reopened.image == metadata_log.image
    assert sorted(reopened.image.topics.by_name) == ["a", "b"]
    reopened.close()


def test_the_next_append_adopts_a_written_snapshot(tmp_path: Path) -> None:
    metadata_log = LocalMetadataLog(tmp_path, snapshot_interval_records=5)
    metadata_log.append(topic("a", 5))
    pending = metadata_log._snapshotting
    assert pending is not None
    pending.future.result(10)
    metadata_log.append(topic("b", 1))
    assert metadata_log._log.log_start_offset == 1  # the snapshot at offset 1 was adopted
    metadata_log.close()
    reopened = LocalMetadataLog(tmp_path, snapshot_interval_records=5)
    assert reopened.image == metadata_log.image
    reopened.close()


def test_a_failed_snapshot_is_taken_again_after_the_next_append(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    metadata_log = LocalMetadataLog(tmp_path, snapshot_interval_records=5)
    arm_failpoints("checkpoint.write=eio")
    metadata_log.append(topic("a", 5))
    pending = metadata_log._snapshotting
    assert pending is not None
    with pytest.raises(OSError):
        pending.future.result(10)
    arm_failpoints("")
    metadata_log.append(topic("b", 1))  # logs the failure, then snapshots again
    metadata_log.close()
    assert checkpoints(tmp_path) == ["00000000000000000002-0000000000.checkpoint"]
    reopened = LocalMetadataLog(tmp_path, snapshot_interval_records=5)
    assert reopened.image == metadata_log.image
    reopened.close()
