"""A share group with ``share.isolation.level=read_committed`` on one embedded node, over the
wire, with transactions from confluent-kafka's producer: it acquires records only up to the
last stable offset, never delivers records of an aborted transaction (they are archived),
and gets the records of a transaction once it commits (a parked ShareFetch wakes). A
read_uncommitted group on the same log gets every record up to the high watermark.

Offsets of the log below: 0-2 committed, 3 its COMMIT marker, 4-5 aborted, 6 its ABORT
marker, 7 of a transaction still open (then 8, its COMMIT marker). Control batches' offsets
are acquired like records (share consumers acknowledge them as GAP), as in read_uncommitted.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.protocol.messages import incremental_alter_configs as iac
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient, decode_response_frame
from support.share_client import acquired, fetch_request, join

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(60)

TOPIC = "txns"
GROUP_RESOURCE = 32


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("share-txn") / "d", overrides=overrides) as b:
        b.broker.topic_creator.create_topic(TOPIC, 1)
        yield b


def _group(client: RawClient, isolation: str) -> str:
    group = f"g-{uuid.uuid4().hex[:8]}"
    configs = [
        iac.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")
    ]
    if isolation:
        configs.append(
            iac.AlterableConfig(name="share.isolation.level", config_operation=0, value=isolation)
        )
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=GROUP_RESOURCE, resource_name=group, configs=configs
            )
        ]
    )
    assert client.request(44, 1, request).body.responses[0].error_code == 0
    return group


def _join_and_fetch(
    client: RawClient, group: str, member: str, topic_id: uuid.UUID
) -> list[tuple[int, int]]:
    assert join(client, group, member, TOPIC).error_code == 0
    body = client.request(78, 1, fetch_request(group, member, 0, topic_id)).body
    assert body.error_code == 0
    return [(first, last) for first, last, _count in acquired(body)]


def _transaction(bootstrap: str, values: list[bytes], commit: bool | None) -> object:
    """Produce ``values`` in one transaction: committed, aborted, or left open (the producer
    is returned so the caller can end it)."""
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(15)
    producer.begin_transaction()
    for value in values:
        producer.produce(TOPIC, value, partition=0)
    producer.flush(15)
    if commit is True:
        producer.commit_transaction(15)
    elif commit is False:
        producer.abort_transaction(15)
    return producer


def test_read_committed_share_group_skips_aborted_and_waits_for_open_transactions(
    broker: EmbeddedBroker,
) -> None:
    bootstrap = broker.bootstrap
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    _transaction(bootstrap, [b"c0", b"c1", b"c2"], commit=True)  # 0-2, marker 3
    _transaction(bootstrap, [b"a0", b"a1"], commit=False)  # 4-5, marker 6
    open_txn = _transaction(bootstrap, [b"o0"], commit=None)  # 7
    with RawClient(bootstrap) as client:
        committed = _group(client, "read_committed")
        member = uuid.uuid4().hex
        # Up to the last stable offset (7), without the aborted records 4-5.
        assert _join_and_fetch(client, committed, member, topic_id) == [(0, 3), (6, 6)]
        # Nothing else until the open transaction ends: a parked ShareFetch wakes on commit.
        client.send_request_no_response(
            78, 1, fetch_request(committed, member, 1, topic_id, 20_000)
        )
        open_txn.commit_transaction(15)  # type: ignore[attr-defined]
        frame = client.read_frame(timeout=30)
        assert frame is not None
        woken = decode_response_frame(frame, 78, 1).body
        assert [(f, last) for f, last, _c in acquired(woken)] == [(7, 8)]

        uncommitted = _group(client, "")  # the default, read_uncommitted
        assert _join_and_fetch(client, uncommitted, uuid.uuid4().hex, topic_id) == [(0, 8)]

    described = broker.broker.share_groups.partitions.get(committed, topic_id, 0)
    assert described is not None
    # The aborted records are archived: never redelivered, counted as done.
    assert [described.record(o).state.name for o in (4, 5)] == ["ARCHIVED", "ARCHIVED"]
