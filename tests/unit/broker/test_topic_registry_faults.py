"""The single node's topic registry when its metadata log write fails: nothing half-created.

A CreateTopics whose metadata log entry cannot be written answers KAFKA_STORAGE_ERROR and
leaves no topic in memory, no partition log on disk and the log as it was; once the disk has
room the same creation succeeds. Deletions and config changes that cannot be persisted are
not applied.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
from pydmq.protocol.errors import ErrorCode, TopicError

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.admin_requests import alter_topic_configs, delete
from support.nodes import broker_of

pytestmark = pytest.mark.timeout(60)

Arm = Callable[[str], None]


def make_broker(data_dir: Path) -> Broker:
    return broker_of(
        BrokerConfig({"log.dirs": str(data_dir), "listeners": "PLAINTEXT://127.0.0.1:0"})
    )


def log_files(metadata_log: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(metadata_log.iterdir())}


def test_a_create_whose_registry_write_fails_leaves_nothing(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    broker = make_broker(tmp_path)
    broker.topic_creator.create_topic("kept", 2)
    metadata_log = tmp_path / "__pydmq_metadata" / "metadata-log"
    before = log_files(metadata_log)
    arm_failpoints("raft.append.write=short")
    with pytest.raises(TopicError) as refused:
        broker.topic_creator.create_topic("lost", 3)
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.topics.get("lost") is None
    assert log_files(metadata_log) == before
    assert not list(tmp_path.glob("lost-*"))
    assert sorted(str(tp) for tp in broker.replica_manager.partitions) == ["kept-0", "kept-1"]

    [deleted] = asyncio.run(delete(broker, ["kept"]))
    assert deleted.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.topics.get("kept") is not None
    altered = asyncio.run(alter_topic_configs(broker, "kept", {"retention.ms": "1000"}))
    assert altered.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    kept = broker.topics.get("kept")
    assert kept is not None and kept.configs == {}
    assert log_files(metadata_log) == before

    arm_failpoints("")
    assert len(broker.topic_creator.create_topic("lost", 3).partitions) == 3
    broker.replica_manager.shutdown()
    reopened = make_broker(tmp_path)
    assert sorted(t.name for t in reopened.topics) == ["kept", "lost"]
    reopened.replica_manager.shutdown()


def test_a_failed_metadata_log_fsync_refuses_every_change_until_a_restart(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    """A failed fsync may have lost the entry's pages: the log goes offline (nothing more is
    acknowledged), the creation it belonged to is rolled back and its entry cut from the log,
    and a restart recovers without it."""
    broker = make_broker(tmp_path)
    broker.topic_creator.create_topic("kept", 1)
    arm_failpoints("raft.fsync=eio-times=1")
    for name in ("lost", "later"):
        with pytest.raises(TopicError) as refused:
            broker.topic_creator.create_topic(name, 2)
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert broker.topics.get(name) is None
        assert not list(tmp_path.glob(f"{name}-*"))
    assert sorted(str(tp) for tp in broker.replica_manager.partitions) == ["kept-0"]
    broker.replica_manager.shutdown()
    assert broker.local_controller is not None
    broker.local_controller.metadata_log.close()

    reopened = make_broker(tmp_path)
    assert [t.name for t in reopened.topics] == ["kept"]
    assert len(reopened.topic_creator.create_topic("later", 2).partitions) == 2
    reopened.replica_manager.shutdown()


def _create(broker: Broker) -> int:
    try:
        broker.topic_creator.create_topic("refused", 2)
    except TopicError as exc:
        return exc.error_code
    return ErrorCode.NONE


def _delete(broker: Broker) -> int:
    [result] = asyncio.run(delete(broker, ["kept"]))
    return result.error_code


def _alter(broker: Broker) -> int:
    return asyncio.run(alter_topic_configs(broker, "kept", {"retention.ms": "1000"})).error_code


@pytest.mark.parametrize("spec", ["raft.append.write=short", "raft.fsync=eio-times=1"])
@pytest.mark.parametrize("change", [_create, _delete, _alter], ids=["create", "delete", "alter"])
def test_a_refused_change_is_absent_after_a_restart(
    tmp_path: Path, arm_failpoints: Arm, spec: str, change: Callable[[Broker], int]
) -> None:
    """The entry of a change answered KAFKA_STORAGE_ERROR is cut from the metadata log (its
    write undone, or everything since the last good fsync when the fsync failed): a restart
    replays the log as it was, so a deletion the client was told failed keeps the topic (and
    so its partition logs), a refused creation or config change is not there."""
    broker = make_broker(tmp_path)
    broker.topic_creator.create_topic("kept", 2, configs={"retention.ms": "5000"})
    kept = broker.topics.get("kept")
    assert kept is not None
    arm_failpoints(spec)
    assert change(broker) == ErrorCode.KAFKA_STORAGE_ERROR
    arm_failpoints("")
    broker.replica_manager.shutdown()
    assert broker.local_controller is not None
    broker.local_controller.metadata_log.close()

    reopened = make_broker(tmp_path)
    assert [t.name for t in reopened.topics] == ["kept"]
    after = reopened.topics.get("kept")
    assert after is not None
    assert (after.topic_id, after.configs) == (kept.topic_id, {"retention.ms": "5000"})
    assert [p.index for p in after.partitions] == [0, 1]
    reopened.replica_manager.shutdown()
