"""``pydmq acls create|list|delete`` against an embedded broker with the StandardAuthorizer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
    with EmbeddedBroker(tmp_path_factory.mktemp("acls-cli") / "d", overrides=overrides) as b:
        yield b


def test_create_list_delete(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    b = ["-b", broker.bootstrap]
    assert main(["acls", "create", *b, "--topic", "orders", "--allow-principal", "User:alice",
                 "--operation", "Read", "--operation", "Describe"]) == 0  # fmt: skip
    assert main(["acls", "create", *b, "--group", "app-", "--resource-pattern-type", "prefixed",
                 "--deny-principal", "User:bob", "--deny-host", "10.0.0.9"]) == 0  # fmt: skip
    assert main(["acls", "create", *b, "--cluster", "--allow-principal", "User:ops",
                 "--operation", "IdempotentWrite"]) == 0  # fmt: skip
    assert "created 2 ACL(s)" in capsys.readouterr().out
    assert main(["acls", "list", *b]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"
    ]  # fmt: skip
    assert [line.split() for line in lines[1:]] == [
        ["CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "*", "IDEMPOTENT_WRITE", "ALLOW"],
        ["GROUP", "app-", "PREFIXED", "User:bob", "10.0.0.9", "ALL", "DENY"],
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
    ]
    assert main(["acls", "list", *b, "--group", "app-1", "--resource-pattern-type", "match"]) == 0
    assert "User:bob" in capsys.readouterr().out
    assert main(["acls", "delete", *b, "--topic", "orders", "--operation", "Read"]) == 0
    assert "deleted 1 ACL(s)" in capsys.readouterr().out
    assert main(["acls", "delete", *b]) == 0
    assert "deleted 3 ACL(s)" in capsys.readouterr().out


def test_refusals(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    b = ["-b", broker.bootstrap]
    assert main(["acls", "create", *b, "--topic", "t"]) == 2
    assert "--allow-principal" in capsys.readouterr().err
    assert main(["acls", "create", *b, "--topic", "", "--allow-principal", "User:a"]) == 1
    assert "INVALID_REQUEST" in capsys.readouterr().err


def test_without_an_authorizer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with EmbeddedBroker(tmp_path / "d") as plain:
        assert main(["acls", "list", "-b", plain.bootstrap]) == 1
        assert "SECURITY_DISABLED" in capsys.readouterr().err
