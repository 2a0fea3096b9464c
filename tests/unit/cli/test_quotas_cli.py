"""``pydmq quotas`` prints values and entities as kafka-configs does (Java's Double text)."""

from __future__ import annotations

import pytest

from pydmq.cli.quotas import entity_description, java_double

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (100000.0, "100000.0"),
        (12.5, "12.5"),
        (1e20, "1.0E20"),
        (2.5e7, "2.5E7"),
        (1234567.0, "1234567.0"),
        (0.0005, "5.0E-4"),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_entity_description_names_the_user_first_and_defaults() -> None:
    assert entity_description([("client-id", None), ("user", "alice")]) == (
        "user-principal 'alice', the default client-id"
    )
    assert entity_description([("ip", "10.0.0.1")]) == "ip '10.0.0.1'"
    assert entity_description([("user", None)]) == "the default user-principal"
