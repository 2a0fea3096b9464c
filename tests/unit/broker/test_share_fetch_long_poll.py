"""ShareFetch's long poll on one embedded node, over the wire: a ShareFetch that found nothing
parks in the fetch purgatory and is answered when records arrive, when another member
releases records, or when another member's acquisition lock runs out, each long before its
``max_wait``; with nothing to wake it, it is answered at ``max_wait`` with no records.

The bounds are loose on purpose (a wake-up answers in milliseconds; ``max_wait`` is 20 s and
the checks only ask for an answer before it), so a loaded machine cannot fail them."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.protocol.messages import share_acknowledge as sa
from pydmq.protocol.messages import share_fetch as sf
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient, decode_response_frame
from support.share_client import acquired, fetch_request, join, produce

pytestmark = pytest.mark.timeout(60)

TOPIC = "parked"
LOCK_MS = 1000
MAX_WAIT_MS = 20_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {"group.share.record.lock.duration.ms": LOCK_MS}
    with EmbeddedBroker(tmp_path_factory.mktemp("share-poll") / "d", overrides=overrides) as b:
        b.broker.topic_creator.create_topic(TOPIC, 1)
        yield b


def _park(client: RawClient, request: sf.ShareFetchRequest) -> float:
    """Send a ShareFetch without reading its answer; the time it was sent."""
    client.send_request_no_response(78, 1, request)
    return time.monotonic()


def _answer(client: RawClient) -> tuple[sf.ShareFetchResponse, float]:
    frame = client.read_frame(timeout=MAX_WAIT_MS / 1000 + 10)
    assert frame is not None, "no answer to the parked ShareFetch"
    body: sf.ShareFetchResponse = decode_response_frame(frame, 78, 1).body
    return body, time.monotonic()


def _ack(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    first: int,
    last: int,
    kind: int,
) -> None:
    batch = sa.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[kind])
    request = sa.ShareAcknowledgeRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        topics=[
            sa.AcknowledgeTopic(
                topic_id=topic_id,
                partitions=[
                    sa.AcknowledgePartition(partition_index=0, acknowledgement_batches=[batch])
                ],
            )
        ],
    )
    body = client.request(79, 1, request).body
    assert body.error_code == 0 and body.responses[0].partitions[0].error_code == 0


def _open(client: RawClient, group: str, member: str, topic_id: uuid.UUID) -> sf.ShareFetchResponse:
    """Join and open the share session (the group starts at the log end: latest)."""
    join(client, group, member, TOPIC)
    body: sf.ShareFetchResponse = client.request(
        78, 1, fetch_request(group, member, 0, topic_id, 0)
    ).body
    assert body.error_code == 0
    return body


def test_parked_share_fetch_is_answered_when_records_arrive(broker: EmbeddedBroker) -> None:
    group, member = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    with RawClient(broker.bootstrap) as waiter, RawClient(broker.bootstrap) as producer:
        _open(waiter, group, member, topic_id)
        sent = _park(waiter, fetch_request(group, member, 1, topic_id, MAX_WAIT_MS))
        time.sleep(0.2)  # let it park (if it answered already, the check below fails)
        start = produce(producer, TOPIC, 3)
        body, answered = _answer(waiter)
        assert acquired(body) == [(start, start + 2, 1)]
        assert answered - sent < MAX_WAIT_MS / 1000 / 2


def test_records_released_by_another_member_wake_a_parked_share_fetch(
    broker: EmbeddedBroker,
) -> None:
    group, a, b = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex, uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    with RawClient(broker.bootstrap) as ca, RawClient(broker.bootstrap) as cb:
        _open(ca, group, a, topic_id)
        _open(cb, group, b, topic_id)
        start = produce(ca, TOPIC, 2)
        got = ca.request(78, 1, fetch_request(group, a, 1, topic_id, 0)).body
        assert acquired(got) == [(start, start + 1, 1)]
        sent = _park(cb, fetch_request(group, b, 1, topic_id, MAX_WAIT_MS))
        time.sleep(0.2)
        _ack(ca, group, a, 2, topic_id, start, start + 1, kind=2)  # RELEASE
        body, answered = _answer(cb)
        assert acquired(body) == [(start, start + 1, 2)]
        assert answered - sent < MAX_WAIT_MS / 1000 / 2


def test_an_expiring_lock_wakes_a_parked_share_fetch(broker: EmbeddedBroker) -> None:
    group, a, b = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex, uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    with RawClient(broker.bootstrap) as ca, RawClient(broker.bootstrap) as cb:
        _open(ca, group, a, topic_id)
        _open(cb, group, b, topic_id)
        start = produce(ca, TOPIC, 1)
        got = ca.request(78, 1, fetch_request(group, a, 1, topic_id, 0)).body
        assert acquired(got) == [(start, start, 1)]
        sent = _park(cb, fetch_request(group, b, 1, topic_id, MAX_WAIT_MS))
        body, answered = _answer(cb)  # a never acknowledges: its lock runs out after 1 s
        assert acquired(body) == [(start, start, 2)]
        assert answered - sent < MAX_WAIT_MS / 1000 / 2


def test_with_nothing_to_wake_it_a_share_fetch_waits_out_max_wait_without_polling(
    broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parked, it reads the partition once when parking and once at ``max_wait``: no
    polling in between (it used to read every 50 ms)."""
    group, member = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    manager = broker.broker.share_groups.partitions
    reads: list[str] = []
    fetch = manager.fetch

    def counted(group_id: str, *args: Any, **kwargs: Any) -> Any:
        if group_id == group:
            reads.append(group_id)
        return fetch(group_id, *args, **kwargs)

    with RawClient(broker.bootstrap) as client:
        _open(client, group, member, topic_id)
        monkeypatch.setattr(manager, "fetch", counted)
        sent = _park(client, fetch_request(group, member, 1, topic_id, 1000))
        body, answered = _answer(client)
        assert body.error_code == 0 and acquired(body) == []
        assert answered - sent >= 1.0
        assert len(reads) == 2


@pytest.mark.parametrize(
    ("mode", "batches", "max_records", "readers", "count"),
    [
        (0, (4, 4), 6, 1, 8),
        (1, (4, 4), 6, 1, 6),
        (0, (10,), 3, 1, 10),
        (1, (10,), 3, 1, 3),
        (0, (10,), 3, 2, 3),
        (0, (4, 4), 6, 2, 8),
    ],
)
def test_acquire_mode_batch_optimized_rounds_up_to_the_batch_record_limit_does_not(
    broker: EmbeddedBroker,
    mode: int,
    batches: tuple[int, ...],
    max_records: int,
    readers: int,
    count: int,
) -> None:
    """KIP-1206: batch_optimized (0, the default) acquires through the end of the batch
    holding the max_records-th record (two batches of 4, max_records 6: 8; one batch of 10,
    max_records 3: 10), record_limit (1) exactly max_records. When another member's share
    session reads the partition too, a single batch larger than max_records is split at
    max_records, so one member does not take it while the others wait."""
    group, member = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    with RawClient(broker.bootstrap) as client:
        _open(client, group, member, topic_id)
        for _ in range(readers - 1):
            _open(client, group, uuid.uuid4().hex, topic_id)
        start = produce(client, TOPIC, batches[0])
        for size in batches[1:]:
            produce(client, TOPIC, size)
        request = fetch_request(group, member, 1, topic_id, 0)
        request.max_records = max_records
        request.share_acquire_mode = mode
        body = client.request(78, 2, request).body
        assert acquired(body) == [(start, start + count - 1, 1)]
