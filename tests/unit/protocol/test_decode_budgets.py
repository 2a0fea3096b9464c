"""Decode budgets: a request stops decoding when its counts exceed its budget, before building.

Each hostile shape repeats one small element (an empty topic entry, a null-records partition,
an empty name) far past its API's budget, in a non-flexible and a flexible version. The
decoder must raise DecodeBudgetExceededError having built none of the elements: the struct
classes of the message module are replaced by counting wrappers, and string reads are
counted. Time is not asserted. Legitimate requests within their budget decode exactly as
before (the Hypothesis round trips of test_messages_oracle.py use unbounded readers; here the
boundary: a request of exactly ``budget`` elements decodes, one more does not).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pydmq.protocol import budgets
from pydmq.protocol.budgets import HEADER_DECODE_BUDGET, decode_budget
from pydmq.protocol.errors import DecodeBudgetExceededError, MalformedFrameError
from pydmq.protocol.headers import parse_request_header
from pydmq.protocol.messages import API_SCHEMAS, produce
from pydmq.protocol.messages.fetch import FetchRequest
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.protocol.primitives import Reader, Writer
from support.hostile_requests import (
    SHAPES,
    HostileShape,
    header_tag_flood_frame,
    repeated_body,
    tag_flood_body,
)

pytestmark = pytest.mark.timeout(120)

HOSTILE_ELEMENTS = 3_000_000  # a 10 MiB Produce of empty topics is 3.5 M of them


def _ids(shape: HostileShape) -> str:
    return f"{shape.name}-v{shape.version}"


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], list[int]]]:
    """``built(api_key)`` counts the structs of that API's module and the strings read."""
    counts = [0]

    def counting(cls: type) -> Callable[..., Any]:
        def build(*args: Any, **kwargs: Any) -> Any:
            counts[0] += 1
            return cls(*args, **kwargs)

        return build

    def string_counter(read: Callable[[Reader], Any]) -> Callable[[Reader], Any]:
        def counted(self: Reader) -> Any:
            counts[0] += 1
            return read(self)

        return counted

    for name in ("string", "compact_string", "nullable_string", "compact_nullable_string"):
        monkeypatch.setattr(Reader, name, string_counter(getattr(Reader, name)))

    def install(api_key: int) -> list[int]:
        module: ModuleType = API_SCHEMAS[api_key].module
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type):
                monkeypatch.setattr(module, name, counting(value))
        return counts

    yield install


def _decode(api_key: int, version: int, body: bytes, budget: int) -> Any:
    reader = Reader(body, budget=budget)
    request = API_SCHEMAS[api_key].decode_request(reader, version)
    assert reader.remaining == 0
    return request


@pytest.mark.parametrize("shape", SHAPES, ids=_ids)
def test_hostile_count_is_refused_before_any_element_is_built(
    shape: HostileShape, built: Callable[[int], list[int]]
) -> None:
    counts = built(shape.api_key)
    _decode(shape.api_key, shape.version, shape.body(0), decode_budget(shape.api_key))
    without_elements = counts[0]  # the root, an enclosing topic, a group id...
    counts[0] = 0
    body = shape.body(HOSTILE_ELEMENTS)
    with pytest.raises(DecodeBudgetExceededError):
        _decode(shape.api_key, shape.version, body, decode_budget(shape.api_key))
    assert counts[0] <= without_elements, f"{counts[0]} objects built before the refusal"


@pytest.mark.parametrize("shape", SHAPES, ids=_ids)
def test_budget_is_exact(shape: HostileShape) -> None:
    """Each repeated element costs one: with room for 50 of them, 50 decode and 51 do not."""
    budget = _elements(shape, 0) + 50
    request = _decode(shape.api_key, shape.version, shape.body(50), budget)
    assert request == shape.build([shape.element] * 50)
    with pytest.raises(DecodeBudgetExceededError):
        _decode(shape.api_key, shape.version, shape.body(51), budget)


def _elements(shape: HostileShape, n: int) -> int:
    """How many elements ``shape.body(n)`` charges: the smallest budget that decodes it."""
    body = shape.body(n)
    low, high = 0, 64 + n
    while low < high:
        mid = (low + high) // 2
        try:
            _decode(shape.api_key, shape.version, body, mid)
        except DecodeBudgetExceededError:
            low = mid + 1
        else:
            high = mid
    return low


def test_budget_is_shared_by_nested_arrays(built: Callable[[int], list[int]]) -> None:
    """Topics of partitions: the partitions of all topics draw on one budget, so a request of
    many topics each just under the budget stops within one topic's worth of elements."""
    counts = built(0)
    budget = decode_budget(0)
    per_topic = budget // 2
    topic = TopicProduceData(
        name="t", partition_data=[PartitionProduceData(index=0, records=None)] * per_topic
    )
    w = Writer()
    API_SCHEMAS[0].encode_request(w, ProduceRequest(acks=1, topic_data=[topic] * 4), 9)
    with pytest.raises(DecodeBudgetExceededError):
        _decode(0, 9, w.getvalue(), budget)
    assert counts[0] <= budget + 4


@pytest.mark.parametrize("version", [8, 9])
def test_over_budget_is_not_malformed(version: int) -> None:
    """Budget errors are their own kind: the dispatcher may answer them (INVALID_REQUEST)."""
    body = repeated_body(
        0,
        version,
        lambda ts: ProduceRequest(acks=1, topic_data=ts),
        TopicProduceData(name="", partition_data=[]),
        10,
    )
    with pytest.raises(DecodeBudgetExceededError) as raised:
        _decode(0, version, body, 5)
    assert not isinstance(raised.value, MalformedFrameError)
    assert raised.value.wanted == 10 and raised.value.budget == 5


def test_null_arrays_cost_nothing() -> None:
    for version in (7, 9):  # nullable int32 count -1, then compact nullable 0
        w = Writer()
        API_SCHEMAS[9].encode_request(w, OffsetFetchRequest(group_id="g", topics=None), version)
        assert _decode(9, version, w.getvalue(), 0).topics is None


def test_number_arrays_are_charged_per_element() -> None:
    request = OffsetFetchRequest(
        group_id="g", topics=[OffsetFetchRequestTopic(name="t", partition_indexes=list(range(9)))]
    )
    for version in (5, 7):
        w = Writer()
        API_SCHEMAS[9].encode_request(w, request, version)
        assert _decode(9, version, w.getvalue(), 10) == request
        with pytest.raises(DecodeBudgetExceededError):
            _decode(9, version, w.getvalue(), 9)


@pytest.mark.parametrize(
    ("api_key", "version", "request_"),
    [(3, 9, MetadataRequest(topics=None)), (1, 12, FetchRequest(replica_id=-1, topics=[]))],
    ids=["metadata-v9", "fetch-v12"],
)
def test_tagged_field_flood_in_a_body_is_refused(
    api_key: int, version: int, request_: Any, built: Callable[[int], list[int]]
) -> None:
    counts = built(api_key)
    _decode(api_key, version, tag_flood_body(api_key, version, request_, 0), 0)
    without_tags = counts[0]
    counts[0] = 0
    body = tag_flood_body(api_key, version, request_, HOSTILE_ELEMENTS)
    with pytest.raises(DecodeBudgetExceededError):
        _decode(api_key, version, body, decode_budget(api_key))
    assert counts[0] < without_tags  # the root, built after its tags, is not built
    kept = _decode(api_key, version, tag_flood_body(api_key, version, request_, 1), 1)
    assert kept.unknown_tagged_fields == {1000: b""}  # unknown tagged fields are kept


def test_tagged_fields_of_nested_structs_draw_on_the_same_budget() -> None:
    topic = TopicProduceData(name="t", unknown_tagged_fields={7: b"x", 8: b"y"})
    w = Writer()
    produce.encode_request(w, ProduceRequest(acks=1, topic_data=[topic] * 3), 9)
    assert len(_decode(0, 9, w.getvalue(), 3 + 6).topic_data) == 3
    with pytest.raises(DecodeBudgetExceededError):
        _decode(0, 9, w.getvalue(), 3 + 5)


def test_tagged_field_flood_in_the_header_is_refused() -> None:
    body = tag_flood_body(3, 9, MetadataRequest(topics=None), 0)
    frame = header_tag_flood_frame(3, 9, body, HOSTILE_ELEMENTS)
    with pytest.raises(DecodeBudgetExceededError):
        parse_request_header(memoryview(frame)[4:])
    fine = header_tag_flood_frame(3, 9, body, HEADER_DECODE_BUDGET)
    header, offset = parse_request_header(memoryview(fine)[4:])
    assert header.unknown_tagged_fields == {1000: b""}
    assert offset == len(fine) - 4 - len(body)


def test_readers_without_a_budget_are_bounded_by_their_bytes_only() -> None:
    body = SHAPES[1].body(200_000)  # produce v9, 200,000 empty topics
    assert len(produce.decode_request(Reader(body), 9).topic_data) == 200_000


def test_every_budget_is_positive_and_the_table_names_real_apis() -> None:
    assert budgets.DEFAULT_DECODE_BUDGET > 0
    for api_key, budget in budgets.DECODE_BUDGETS.items():
        assert api_key in API_SCHEMAS
        assert budget >= budgets.DEFAULT_DECODE_BUDGET
    assert decode_budget(18) == budgets.DEFAULT_DECODE_BUDGET  # ApiVersions: not listed
