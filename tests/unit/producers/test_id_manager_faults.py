"""Producer ids are handed out only from a block that is durable, even when its write fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pydmq.producers.id_manager import ProducerIdBlockError, ProducerIdManager

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("spec", ["checkpoint.write=short", "checkpoint.fsync=eio"])
def test_no_id_of_a_block_that_was_not_written(
    tmp_path: Path, arm_failpoints: Callable[[str], None], spec: str
) -> None:
    path = tmp_path / "producer-id-block"
    manager = ProducerIdManager(path, block_size=10)
    assert [manager.generate_producer_id() for _ in range(10)] == list(range(10))
    arm_failpoints(spec)
    for _ in range(2):
        with pytest.raises(ProducerIdBlockError):
            manager.generate_producer_id()
    assert path.read_bytes() == (10).to_bytes(8, "big")
    arm_failpoints("")
    assert manager.generate_producer_id() == 10
    assert path.read_bytes() == (20).to_bytes(8, "big")
    assert ProducerIdManager(path, block_size=10).generate_producer_id() == 20
