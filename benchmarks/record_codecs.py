"""Encode and decode cost of the stored records: ``__consumer_offsets`` and ``__cluster_metadata``.

Prints the best of ``--repeat`` runs, per record, in microseconds of CPU time (the machine
may be shared); nothing is asserted. It
measures whichever pydmq is importable, so the same script compares two checkouts:

    PYTHONPATH=src .venv/bin/python benchmarks/record_codecs.py
    PYTHONPATH=/path/to/other/checkout/src .venv/bin/python benchmarks/record_codecs.py

The cases are what a broker does with these records: an OffsetCommit writes a key and value
per partition and a restart decodes them again; a classic group rebalance writes its group
metadata; a KIP-848 heartbeat writes member records; the controller writes and replays
partition records.
"""

from __future__ import annotations

import argparse
import time
import timeit
import uuid
from collections.abc import Callable

from pydmq.groups.consumer import records as crec
from pydmq.groups.records import (
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from pydmq.metadata.records import (
    Endpoint,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    decode_record,
    encode_record,
)

TID = uuid.UUID(int=7)


def _cases() -> list[tuple[str, Callable[[], object]]]:
    key = OffsetCommitKey("my-consumer-group", "orders", 7)
    value = OffsetCommitValue(123456789, 5, "", 1700000000000)
    members = tuple(
        MemberMetadataValue(
            f"m-{i}", None, "client", "/10.0.0.1", 300000, 45000, b"s" * 40, b"a" * 60
        )
        for i in range(10)
    )
    group = GroupMetadataValue("consumer", 12, "range", "m-0", 1700000000000, members)
    parts = {uuid.UUID(int=i): frozenset(range(8)) for i in range(10)}
    current = crec.CurrentMemberValue(9, 8, 0, False, parts, {})
    ckey = crec.ConsumerGroupKey(crec.CURRENT_MEMBER, "my-consumer-group", "member-1")
    partition = PartitionRecord(3, TID, (1, 2, 3), (1, 2, 3), (), (), 1, 0, 4, 5)
    change = PartitionChangeRecord(3, TID, isr=(1, 2), leader=2)
    broker = RegisterBrokerRecord(
        1, TID, 10, (Endpoint("PLAINTEXT", "localhost", 9092),), None, True, False
    )
    kb, vb, gb = key.encode(), value.encode(), group.encode()
    cb, ckb = crec.encode_current_member(current), ckey.encode()
    pb, chb, bb = encode_record(partition), encode_record(change), encode_record(broker)
    return [
        ("offset commit key+value encode", lambda: (key.encode(), value.encode())),
        (
            "offset commit key+value decode",
            lambda: (decode_key(kb), decode_offset_commit_value(vb)),
        ),
        ("group metadata (10 members) encode", group.encode),
        ("group metadata (10 members) decode", lambda: decode_group_metadata_value(gb)),
        (
            "consumer current member key+value encode",
            lambda: (ckey.encode(), crec.encode_current_member(current)),
        ),
        (
            "consumer current member key+value decode",
            lambda: (crec.decode_consumer_key(ckb), crec.decode_current_member(cb)),
        ),
        ("PartitionRecord encode", lambda: encode_record(partition)),
        ("PartitionRecord decode", lambda: decode_record(pb)),
        ("PartitionChangeRecord encode", lambda: encode_record(change)),
        ("PartitionChangeRecord decode", lambda: decode_record(chb)),
        ("RegisterBrokerRecord decode", lambda: decode_record(bb)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best is printed")
    args = parser.parse_args()
    for name, fn in _cases():
        runs = timeit.repeat(fn, number=args.number, repeat=args.repeat, timer=time.process_time)
        best = min(runs) / args.number
        print(f"{name:45s} {best * 1e6:7.2f} us")


if __name__ == "__main__":
    main()
