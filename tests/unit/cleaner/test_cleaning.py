"""The sans-IO cleaning of batches (pydmq.cleaner.cleaning) on hand-built batches."""

from __future__ import annotations

import pytest

from pydmq.cleaner.cleaning import BatchCleaner, CleaningRules, OffsetMapBuilder
from pydmq.cleaner.offset_map import ENTRY_BYTES, OffsetMap
from pydmq.protocol.batch_header import DELETE_HORIZON_FLAG
from pydmq.protocol.records import (
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
    decode_records,
    parse_batch_header,
    validate_crc,
)
from pydmq.storage.api import AbortedTxn

pytestmark = pytest.mark.timeout(30)

TS = 1_700_000_000_000


def batch(
    base: int, *kv: tuple[bytes | None, bytes | None], compression: int = 0, **kw: int
) -> bytes:
    return build_batch(
        [SimpleRecord(k, v, (), TS + base + i) for i, (k, v) in enumerate(kv)],
        base_offset=base,
        compression=compression,
        **kw,  # type: ignore[arg-type]
    )


def mapped(*batches: bytes, stop: int = 1 << 62, buffer: int = 1 << 20) -> OffsetMapBuilder:
    builder = OffsetMapBuilder(OffsetMap(buffer), 0, stop)
    for b in batches:
        if not builder.add(b):
            break
    return builder


def records(buf: bytes | memoryview) -> list[tuple[int, int, bytes | None, bytes | None]]:
    header = parse_batch_header(buf, 0)
    validate_crc(buf, header)
    return [(r.offset, r.timestamp, r.key, r.value) for r in decode_records(buf, header)]


def cleaner(
    builder: OffsetMapBuilder, now: int = TS, retention: int = 1000, **last: int
) -> BatchCleaner:
    producers = {int(k[1:]): v for k, v in last.items()}
    return BatchCleaner(builder.offset_map, CleaningRules(now, retention, producers))


def test_latest_value_of_each_key_is_kept_at_its_offset() -> None:
    b0 = batch(0, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"))
    b3 = batch(3, (b"b", b"2"), (b"c", b"1"))
    c = cleaner(mapped(b0, b3))
    out0 = c.clean(b0)
    assert out0 is not None
    header = parse_batch_header(out0, 0)
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 2, 1)
    assert records(out0) == [(2, TS + 2, b"a", b"2")]
    assert c.clean(b3) is b3  # every record kept: the very same bytes
    assert c.stats.records_read == 5 and c.stats.records_written == 3


def test_a_batch_with_nothing_left_is_dropped() -> None:
    b0 = batch(0, (b"a", b"1"))
    b1 = batch(1, (b"a", b"2"))
    c = cleaner(mapped(b0, b1))
    assert c.clean(b0) is None
    assert c.clean(b1) is b1


def test_records_without_a_key_are_kept() -> None:
    b0 = batch(0, (None, b"x"), (b"a", b"1"), (None, b"y"))
    b3 = batch(3, (b"a", b"2"))
    out = cleaner(mapped(b0, b3)).clean(b0)
    assert out is not None
    assert [(o, k, v) for o, _, k, v in records(out)] == [(0, None, b"x"), (2, None, b"y")]


def test_tombstones_get_a_delete_horizon_then_go_once_it_has_passed() -> None:
    b0 = batch(0, (b"a", b"1"), (b"b", b"1"))
    b2 = batch(2, (b"a", None), (b"c", b"1"))
    first = cleaner(mapped(b0, b2), now=TS + 50, retention=1000)
    assert records(first.clean(b0) or b"") == [(1, TS + 1, b"b", b"1")]
    marked = first.clean(b2)
    assert marked is not None
    header = parse_batch_header(marked, 0)
    assert header.attributes & DELETE_HORIZON_FLAG
    assert header.base_timestamp == TS + 50 + 1000
    # The records keep their own timestamps (deltas rewritten against the horizon).
    assert records(marked) == [(2, TS + 2, b"a", None), (3, TS + 3, b"c", b"1")]
    # Before the horizon a later cleaning keeps the tombstone, unchanged.
    before = cleaner(mapped(marked), now=TS + 1049)
    assert before.clean(marked) is marked
    after = cleaner(mapped(marked), now=TS + 1050)
    out = after.clean(marked)
    assert out is not None and records(out) == [(3, TS + 3, b"c", b"1")]
    assert parse_batch_header(out, 0).last_offset == 3


def test_last_batch_of_a_producer_is_kept_empty() -> None:
    p0 = batch(0, (b"a", b"1"), producer_id=7, producer_epoch=2, base_sequence=0)
    p1 = batch(1, (b"a", b"2"), producer_id=7, producer_epoch=2, base_sequence=1)
    p2 = batch(2, (b"b", b"1"), (b"a", b"3"), producer_id=7, producer_epoch=2, base_sequence=2)
    last = batch(4, (b"a", b"4"), (b"b", b"2"))
    c = cleaner(mapped(p0, p1, p2, last), p7=3)
    assert c.clean(p0) is None and c.clean(p1) is None
    empty = c.clean(p2)
    assert empty is not None
    header = parse_batch_header(empty, 0)
    validate_crc(empty, header)
    assert (header.base_offset, header.last_offset, header.records_count) == (2, 3, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 2)
    assert header.last_sequence == 3


def txn_batch(base: int, *kv: tuple[bytes, bytes], seq: int) -> bytes:
    return batch(base, *kv, producer_id=3, producer_epoch=0, base_sequence=seq,
                 is_transactional=True)  # fmt: skip


def marker(base: int, commit: bool) -> bytes:
    return build_end_txn_marker(
        producer_id=3, producer_epoch=0, commit=commit, coordinator_epoch=0, base_offset=base
    )


def test_committed_transactional_records_are_mapped_and_cleaned_markers_kept() -> None:
    txn = txn_batch(0, (b"a", b"1"), seq=0)
    commit = marker(1, commit=True)
    plain = batch(2, (b"a", b"2"))
    c = BatchCleaner(mapped(txn, commit, plain).offset_map, CleaningRules(TS, 1000, {}))
    assert c.clean(txn) is None  # a later value of "a" exists
    assert c.clean(commit) is commit
    assert c.clean(plain) is plain


def test_aborted_records_are_neither_mapped_nor_kept() -> None:
    plain = batch(0, (b"a", b"1"))
    aborted = txn_batch(1, (b"a", b"2"), (b"b", b"1"), seq=0)
    abort = marker(3, commit=False)
    txns = [AbortedTxn(3, 1, 3, 4)]
    builder = OffsetMapBuilder(OffsetMap(1 << 20), 0, 1 << 62, txns)
    for b in (plain, aborted, abort):
        assert builder.add(b)
    assert builder.offset_map.get(b"b") == -1
    c = BatchCleaner(builder.offset_map, CleaningRules(TS, 1000, {}, txns))
    assert c.clean(plain) is plain  # the aborted value of "a" does not replace it
    assert c.clean(aborted) is None
    assert c.clean(abort) is abort
    kept_empty = BatchCleaner(builder.offset_map, CleaningRules(TS, 1000, {3: 2}, txns))
    assert kept_empty.clean(plain) is plain
    empty = kept_empty.clean(aborted)  # the producer's last batch: kept without records
    assert empty is not None and parse_batch_header(empty, 0).records_count == 0


def test_transactional_batches_past_the_first_uncleanable_offset_pass_untouched() -> None:
    txn = txn_batch(0, (b"a", b"1"), seq=0)
    plain = batch(1, (b"a", b"2"))
    c = BatchCleaner(
        mapped(txn, plain).offset_map, CleaningRules(TS, 1000, {}, transactions_up_to=0)
    )
    assert c.clean(txn) is txn


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_rewritten_batch_keeps_its_codec(codec: int) -> None:
    b0 = batch(0, *[(b"k%d" % (i % 3), b"v%d" % i) for i in range(9)], compression=codec)
    b9 = batch(9, (b"k0", b"last"))
    out = cleaner(mapped(b0, b9)).clean(b0)
    assert out is not None
    header = parse_batch_header(out, 0)
    assert header.compression == codec
    assert [(o, v) for o, _, _, v in records(out)] == [(7, b"v7"), (8, b"v8")]
    assert header.max_timestamp == TS + 8


def test_the_offset_map_stops_where_it_fills() -> None:
    batches = [
        batch(i * 2, (b"k%d" % (2 * i), b"v"), (b"k%d" % (2 * i + 1), b"v")) for i in range(10)
    ]
    builder = mapped(*batches, buffer=int(7 * ENTRY_BYTES / 0.9) + 1)  # room for 7 keys
    assert builder.full
    assert builder.reached == 6  # three whole batches; the fourth would overflow
    assert len(builder.offset_map) == 6


def test_mapping_stops_before_a_batch_past_the_uncleanable_offset() -> None:
    builder = mapped(batch(0, (b"a", b"1")), batch(1, (b"a", b"2"), (b"b", b"1")), stop=2)
    assert builder.reached == 1 and not builder.full
    assert builder.offset_map.get(b"a") == 0


def test_markers_go_once_their_records_are_gone_and_their_horizon_passed() -> None:
    abort, commit = marker(3, commit=False), marker(4, commit=True)
    txns = [AbortedTxn(3, 1, 3, 4)]  # the aborted records (1-2) are gone already
    builder = mapped(abort, commit)
    first = BatchCleaner(builder.offset_map, CleaningRules(TS, 1000, {}, txns))
    with_horizon = first.clean(abort)
    assert with_horizon is not None and with_horizon is not abort
    header = parse_batch_header(with_horizon, 0)
    assert header.attributes & DELETE_HORIZON_FLAG and header.base_timestamp == TS + 1000
    assert header.is_control and header.records_count == 1
    assert first.take_dropped_index_entries() == [3]  # the entry goes before the marker
    assert first.take_dropped_index_entries() == []
    assert first.clean(commit) is not commit  # no committed record of producer 3 was seen
    before = BatchCleaner(builder.offset_map, CleaningRules(TS + 999, 1000, {}, txns))
    assert before.clean(with_horizon) is with_horizon
    after = BatchCleaner(builder.offset_map, CleaningRules(TS + 1000, 1000, {}, txns))
    assert after.clean(with_horizon) is None


def test_a_marker_stays_while_a_batch_of_its_transaction_was_seen() -> None:
    aborted = txn_batch(1, (b"a", b"1"), seq=0)
    abort = marker(2, commit=False)
    txns = [AbortedTxn(3, 1, 2, 3)]
    c = BatchCleaner(mapped(aborted, abort).offset_map, CleaningRules(TS, 1000, {}, txns))
    assert c.clean(aborted) is None
    assert c.clean(abort) is abort
    assert c.take_dropped_index_entries() == []
