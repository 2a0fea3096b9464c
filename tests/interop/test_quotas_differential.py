"""AlterClientQuotas (49) and DescribeClientQuotas (48), differential against Kafka 4.4.

The same script of requests runs against the reference Kafka (compat/kafka/dist, one fresh
KRaft node) and a fresh pydmq node, in order (later steps see the quotas earlier ones set),
and every answer must be the same: error codes, error messages, the entities (their pairs
sorted, since Kafka lists them in hash order) and the described values. The cases cover the
entity checks (empty, unknown type, empty name, ip combined with user or client-id, ip names),
the value checks (unknown key, key of the wrong entity, zero, negative, fractional, NaN,
infinite, too large for a LONG / INT), duplicates, removal, validate_only, both versions,
and the filter's match types, ``strict`` and its errors. A second script compares the
quotas' enforcement: a produce over ``producer_byte_rate`` gets the same throttle time to
the millisecond, and ``controller_mutation_rate`` refuses and throttles the same topics.

Not compared: an ip entity named by a host name that does not resolve (Kafka resolves it,
pydmq checks only its form; see pydmq.quotas.validation).
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.protocol.messages import alter_client_quotas as aq
from pydmq.protocol.messages import describe_client_quotas as dq
from pydmq.testing.process import BrokerProcess

from .differential_support import ReferenceKafka, reference_kafka_unavailable, wait_until_serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

KAFKA_START_TIMEOUT = 120
NAN, INF = math.nan, math.inf

Entity = list[tuple[str, str | None]]
Op = tuple[str, float, bool]


def alter(entries: list[tuple[Entity, list[Op]]], validate_only: bool = False, version: int = 1):
    def run(client: RawClient) -> Any:
        request = aq.AlterClientQuotasRequest(
            entries=[
                aq.EntryData(
                    entity=[aq.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[aq.OpData(key=k, value=v, remove=r) for k, v, r in ops],
                )
                for entity, ops in entries
            ],
            validate_only=validate_only,
        )
        body = client.request(49, version, request).body
        return sorted(
            (
                sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity),
                entry.error_code,
                entry.error_message,
            )
            for entry in body.entries
        )

    return run


def describe(components: list[tuple[str, int, str | None]], strict: bool = False, version: int = 1):
    def run(client: RawClient) -> Any:
        request = dq.DescribeClientQuotasRequest(
            components=[
                dq.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components
            ],
            strict=strict,
        )
        body = client.request(48, version, request).body
        entries = None
        if body.entries is not None:
            entries = sorted(
                (
                    sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity),
                    sorted((v.key, v.value) for v in entry.values),
                )
                for entry in body.entries
            )
        return body.error_code, body.error_message, entries

    return run


U, C, IP = "user", "client-id", "ip"
PBR, CBR, RP, CMR, CCR = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",
)
EXACT, DEFAULT, SPECIFIED = 0, 1, 2

CASES: list[tuple[str, Callable[[RawClient], Any]]] = [
    ("set a user quota", alter([([(U, "alice")], [(PBR, 1000.0, False)])])),
    ("negative", alter([([(U, "alice")], [(PBR, -1.0, False)])])),
    ("zero", alter([([(U, "alice")], [(PBR, 0.0, False)])])),
    ("fractional LONG", alter([([(U, "alice")], [(PBR, 1.5, False)])])),
    ("fractional DOUBLE", alter([([(U, "alice")], [(RP, 1.5, False)])])),
    ("ip key on a user", alter([([(U, "alice")], [(CCR, 5.0, False)])])),
    ("unknown key", alter([([(U, "alice")], [("bogus", 5.0, False)])])),
    ("ip quota", alter([([(IP, "1.2.3.4")], [(CCR, 5.0, False)])])),
    ("user key on an ip", alter([([(IP, "1.2.3.4")], [(PBR, 5.0, False)])])),
    ("malformed ip", alter([([(IP, "notanip..")], [(CCR, 5.0, False)])])),
    ("ip with user", alter([([(IP, "1.2.3.4"), (U, "bob")], [(CCR, 5.0, False)])])),
    ("ip with client", alter([([(IP, "1.2.3.4"), (C, "x")], [(CCR, 5.0, False)])])),
    ("user and client", alter([([(U, "alice"), (C, "cl")], [(CBR, 2000.0, False)])])),
    ("default user, default client", alter([([(U, None), (C, None)], [(CBR, 3000.0, False)])])),
    ("empty user name", alter([([(U, "")], [(CBR, 3000.0, False)])])),
    ("empty client name", alter([([(U, "u1"), (C, "")], [(PBR, 5.0, False)])])),
    ("empty ip name", alter([([(IP, "")], [(CCR, 5.0, False)])])),
    ("unknown entity type", alter([([("group", "g")], [(CBR, 3000.0, False)])])),
    ("unknown type beside user", alter([([(U, "u1"), ("group", "x")], [(PBR, 5.0, False)])])),
    ("empty entity", alter([([], [(CBR, 3000.0, False)])])),
    ("entity type twice", alter([([(U, "a"), (U, "b")], [(CBR, 3000.0, False)])])),
    ("key twice", alter([([(C, "x")], [(CBR, 3000.0, False), (CBR, 4000.0, False)])])),
    (
        "entity twice",
        alter([([(C, "d")], [(CBR, 3000.0, False)]), ([(C, "d")], [(PBR, 3000.0, False)])]),
    ),
    ("validate only", alter([([(C, "y")], [(CBR, 3000.0, False)])], validate_only=True)),
    ("remove an absent key", alter([([(C, "z")], [(CBR, 3000.0, True)])])),
    ("huge DOUBLE", alter([([(C, "x")], [(CMR, 1e20, False)])])),
    ("too large for a LONG", alter([([(C, "x")], [(PBR, 1e20, False)])])),
    ("default ip", alter([([(IP, None)], [(CCR, 2.0, False)])])),
    ("too large for an INT", alter([([(IP, "1.2.3.4")], [(CCR, 3e9, False)])])),
    ("fractional INT", alter([([(IP, "1.2.3.4")], [(CCR, 2.5, False)])])),
    ("ipv6", alter([([(IP, "::1")], [(CCR, 5.0, False)])])),
    (
        "one good entity, one bad",
        alter([([(C, "e")], [(CBR, 3000.0, False)]), ([(C, "f")], [("bogus", 3000.0, False)])]),
    ),
    (
        "a bad key spoils its entity",
        alter([([(C, "g")], [(CBR, 3.0, False), ("bogus", 1.0, False)])]),
    ),
    ("remove and set", alter([([(C, "e")], [(CBR, 3000.0, True), (PBR, 10.0, False)])])),
    ("remove an unknown key", alter([([(C, "e")], [("bogus", -1.0, True)])])),
    ("NaN", alter([([(U, "u1")], [(PBR, NAN, False)])])),
    ("infinity", alter([([(U, "u1")], [(PBR, INF, False)])])),
    ("no ops", alter([([(U, "u1")], [])])),
    ("no entries", alter([])),
    ("v0", alter([([(U, "carol")], [(PBR, 1000.0, False)])], version=0)),
    ("everything", describe([])),
    ("nothing, strict", describe([], strict=True)),
    ("user alice", describe([(U, EXACT, "alice")])),
    ("user alice, strict", describe([(U, EXACT, "alice")], strict=True)),
    ("default user", describe([(U, DEFAULT, None)])),
    ("any user", describe([(U, SPECIFIED, None)])),
    ("any user, strict", describe([(U, SPECIFIED, None)], strict=True)),
    ("any client, strict", describe([(C, SPECIFIED, None)], strict=True)),
    ("any user and client, strict", describe([(U, SPECIFIED, None), (C, SPECIFIED, None)], True)),
    ("defaults", describe([(U, DEFAULT, None), (C, DEFAULT, None)])),
    ("default user, any client", describe([(U, DEFAULT, None), (C, SPECIFIED, None)], True)),
    ("alice, default client", describe([(U, EXACT, "alice"), (C, DEFAULT, None)])),
    ("exact without a name", describe([(U, EXACT, None)])),
    ("default with a name", describe([(U, DEFAULT, "x")])),
    ("specified with a name", describe([(C, SPECIFIED, "x")])),
    ("unknown match type", describe([(U, 3, None)])),
    ("unknown entity type", describe([("group", SPECIFIED, None)])),
    ("empty entity type", describe([("", SPECIFIED, None)])),
    ("a type twice", describe([(U, SPECIFIED, None), (U, SPECIFIED, None)])),
    ("any ip", describe([(IP, SPECIFIED, None)])),
    ("default ip", describe([(IP, DEFAULT, None)])),
    ("one ip", describe([(IP, EXACT, "1.2.3.4")])),
    ("ip with user", describe([(IP, SPECIFIED, None), (U, SPECIFIED, None)])),
    ("unknown client", describe([(C, EXACT, "nope")])),
    ("v0", describe([(U, EXACT, "alice")], version=0)),
]


def _observe(bootstrap: str) -> list[Any]:
    with RawClient(bootstrap, timeout=30) as client:
        return [run(client) for _, run in CASES]


@pytest.fixture(scope="module")
def bootstraps() -> Iterator[tuple[str, str]]:
    missing = reference_kafka_unavailable()
    if missing:
        pytest.skip(missing)
    kafka = ReferenceKafka({}).start()  # the JVM starts while pydmq does
    root = Path(tempfile.mkdtemp(prefix="pydmq-quotas-diff-"))
    pydmq = BrokerProcess(root / "data", log_path=root / "broker.log")
    try:
        pydmq.start(30)
        wait_until_serving(pydmq.bootstrap, time.monotonic() + 30)
        kafka.wait_ready(KAFKA_START_TIMEOUT)
        yield kafka.bootstrap, pydmq.bootstrap
    finally:
        pydmq.stop()
        kafka.stop()
        kafka.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def test_alter_and_describe_client_quotas_answer_as_kafka(bootstraps: tuple[str, str]) -> None:
    kafka, pydmq = bootstraps
    expected, actual = _observe(kafka), _observe(pydmq)
    differences = [
        f"{name}:\n  kafka: {k!r}\n  pydmq: {p!r}"
        for (name, _), k, p in zip(CASES, expected, actual, strict=True)
        if k != p
    ]
    print(f"\n{len(CASES)} AlterClientQuotas/DescribeClientQuotas cases compared")
    assert not differences, "\n".join(differences)


def _throttle_scenario(bootstrap: str, tag: str) -> dict[str, Any]:
    """Quotas enforced: a produce over ``producer_byte_rate`` (its exact throttle time: the
    request size and Kafka's formula), and ``controller_mutation_rate`` on strict, permissive
    and validate-only CreateTopics and on DeleteTopics (codes and messages; the throttle
    times depend on the clock, so only whether there is one)."""
    from pydmq.protocol.messages import create_topics as ct
    from pydmq.protocol.messages import delete_topics as dt
    from pydmq.protocol.messages import produce as pr
    from pydmq.protocol.records import SimpleRecord, build_batch

    def set_quota(client_id: str, key: str) -> None:
        value = 1000.0 if key == PBR else 1.0
        entity = [aq.EntityData(entity_type=C, entity_name=client_id)]
        request = aq.AlterClientQuotasRequest(
            entries=[aq.EntryData(entity=entity, ops=[aq.OpData(key=key, value=value)])]
        )
        with RawClient(bootstrap) as client:
            assert client.request(49, 1, request).body.entries[0].error_code == 0

    def create(client_id: str, version: int, names: list[str], validate: bool = False) -> Any:
        request = ct.CreateTopicsRequest(
            topics=[
                ct.CreatableTopic(name=n, num_partitions=10, replication_factor=1) for n in names
            ],
            timeout=30_000,
            validate_only=validate,
        )
        with RawClient(bootstrap) as client:
            body = client.request(19, version, request, client_id=client_id).body
        return [(t.error_code, t.error_message) for t in body.topics], body.throttle_time > 0

    for client_id in ("mut", "old", "val"):
        set_quota(f"{client_id}-{tag}", CMR)
    set_quota(f"prod-{tag}", PBR)
    time.sleep(1)  # every broker of the cluster has them
    seen: dict[str, Any] = {
        "strict": create(f"mut-{tag}", 7, [f"{tag}-s{i}" for i in range(3)]),
        "permissive": create(f"old-{tag}", 5, [f"{tag}-o{i}" for i in range(3)]),
        "validate only": create(f"val-{tag}", 7, [f"{tag}-v{i}" for i in range(3)], True),
        "after validate only": create(f"val-{tag}", 7, [f"{tag}-w{i}" for i in range(3)]),
    }
    request = dt.DeleteTopicsRequest(
        topics=[dt.DeleteTopicState(name=f"{tag}-s{i}") for i in range(2)], timeout=30_000
    )
    with RawClient(bootstrap) as client:
        body = client.request(20, 6, request, client_id=f"mut-{tag}").body
    seen["delete"] = ([r.error_code for r in body.responses], body.throttle_time > 0)
    batch = build_batch([SimpleRecord(None, b"v" * 60_000, timestamp=0)])
    request = pr.ProduceRequest(
        acks=1,
        timeout=10_000,
        topic_data=[
            pr.TopicProduceData(
                name=f"{tag}-o0", partition_data=[pr.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    with RawClient(bootstrap) as client:
        body = client.request(0, 9, request, client_id=f"prod-{tag}").body
    # (the partition's answer may be UNKNOWN_TOPIC_OR_PARTITION on Kafka, whose broker may not
    # have the new topic yet: the size is recorded and the throttle computed all the same)
    seen["produce throttle_time_ms"] = body.throttle_time
    return seen


def test_throttles_answer_as_kafka(bootstraps: tuple[str, str]) -> None:
    kafka, pydmq = bootstraps
    expected, actual = _throttle_scenario(kafka, "t1"), _throttle_scenario(pydmq, "t1")
    print(f"\nKafka: {expected}\npydmq: {actual}")
    assert actual == expected
