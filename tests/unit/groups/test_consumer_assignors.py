"""Server-side assignors (KIP-848): uniform (balanced, sticky) and range (co-partitioned)."""

from __future__ import annotations

import random
import uuid

import pytest

from pydmq.assignment import (
    AssignmentSpec,
    InvalidAssignmentError,
    MemberSubscription,
    RangeAssignor,
    TopicMetadata,
    UniformAssignor,
    validate_assignment,
)

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))
TOPICS = {
    T1: TopicMetadata(T1, "a", 6),
    T2: TopicMetadata(T2, "b", 6),
    T3: TopicMetadata(T3, "c", 5),
}


def spec(
    members: dict[str, set[uuid.UUID]],
    current: dict[str, dict[uuid.UUID, frozenset[int]]] | None = None,
) -> AssignmentSpec:
    current = current or {}
    return AssignmentSpec(
        {
            m: MemberSubscription(m, None, None, frozenset(t), current.get(m, {}))
            for m, t in members.items()
        },
        TOPICS,
    )


def counts(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in parts.values()) for m, parts in result.items()}


def test_uniform_is_balanced_within_one_and_complete() -> None:
    for n in range(1, 9):
        s = spec({f"m{i}": {T1, T2, T3} for i in range(n)})
        result = validate_assignment(s, UniformAssignor().assign(s))
        c = counts(result)
        assert max(c.values()) - min(c.values()) <= 1
        assert sum(c.values()) == 17


def test_uniform_is_sticky() -> None:
    s = spec({f"m{i}": {T1, T2} for i in range(3)})
    first = validate_assignment(s, UniformAssignor().assign(s))
    # a fourth member joins: only the partitions it gets move
    s2 = spec({f"m{i}": {T1, T2} for i in range(4)}, first)
    second = validate_assignment(s2, UniformAssignor().assign(s2))
    moved = sum(
        len(first[m].get(t, frozenset()) - second[m].get(t, frozenset()))
        for m in first
        for t in (T1, T2)
    )
    assert moved == 3 == counts(second)["m3"]
    # a member leaves: the others keep everything they had
    s3 = spec({m: {T1, T2} for m in ("m0", "m1", "m3")}, second)
    third = validate_assignment(s3, UniformAssignor().assign(s3))
    for m in ("m0", "m1", "m3"):
        for t in (T1, T2):
            assert second[m].get(t, frozenset()) <= third[m].get(t, frozenset())
    assert max(counts(third).values()) - min(counts(third).values()) <= 1


def test_uniform_heterogeneous_subscriptions() -> None:
    rng = random.Random(7)
    for _ in range(50):
        members = {
            f"m{i}": set(rng.sample([T1, T2, T3], rng.randint(1, 3)))
            for i in range(rng.randint(1, 6))
        }
        s = spec(members)
        result = validate_assignment(s, UniformAssignor().assign(s))
        subscribed = set().union(*members.values())
        assigned = {(t, p) for parts in result.values() for t, ps in parts.items() for p in ps}
        assert assigned == {(t, p) for t in subscribed for p in range(TOPICS[t].partitions)}


def test_range_is_co_partitioned() -> None:
    s = spec({"m1": {T1, T2}, "m2": {T1, T2}, "m3": {T1, T2}})
    result = validate_assignment(s, RangeAssignor().assign(s))
    for m in result:
        assert result[m][T1] == result[m][T2]
    assert result["m1"][T1] == frozenset({0, 1})
    s = spec({"m1": {T3}, "m2": {T3}})
    result = validate_assignment(s, RangeAssignor().assign(s))
    assert result["m1"][T3] == frozenset({0, 1, 2}) and result["m2"][T3] == frozenset({3, 4})


def test_validation_rejects_broken_assignments() -> None:
    s = spec({"m1": {T1}, "m2": {T1}})
    with pytest.raises(InvalidAssignmentError):
        validate_assignment(s, {"m1": {T1: frozenset({0})}, "m2": {T1: frozenset({0})}})
    with pytest.raises(InvalidAssignmentError):
        validate_assignment(s, {"m1": {T2: frozenset({0})}})
    with pytest.raises(InvalidAssignmentError):
        validate_assignment(s, {"m1": {T1: frozenset({6})}})
    with pytest.raises(InvalidAssignmentError):
        validate_assignment(s, {"zz": {}})
