"""The console behind HTTP Basic when the client listener is SASL, as the REST admin API: the
same users, and the same ACLs for their principal (against a real ``pydmq serve``)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_http import get, post_json, wait_http

from pydmq.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


class SaslBroker(BrokerProcess):
    """``pydmq serve`` whose client listener is SASL_PLAINTEXT."""

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listeners") + 1] = f"SASL_PLAINTEXT://{self.host}:{self.port}"
        return cmd


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = SaslBroker(
        tmp_path / "data",
        overrides={
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
        log_path=tmp_path / "broker.log",
    )
    broker.start()
    try:
        wait_http(broker)
        yield broker
    finally:
        broker.stop()


def test_console_needs_credentials_and_applies_acls(secured: BrokerProcess) -> None:
    port = secured.http_port
    for path in ("/", "/topics", "/groups", "/topics/secret", "/groups/g"):
        missing = get(port, path)
        assert missing.status == 401, path
        assert missing.headers["www-authenticate"].startswith("Basic ")
    assert get(port, "/", headers=_basic("admin", "wrong")).status == 401
    admin = _basic("admin", "admin-secret")
    request_headers = {"content-type": "application/json", **admin}
    assert post_json(port, "/v1/admin/topics", {"name": "secret"}, request_headers) == 201
    assert get(port, "/", headers=admin).status == 200
    assert "secret" in get(port, "/topics", headers=admin).text
    assert get(port, "/topics/secret", headers=admin).status == 200
    # alice has no ACL: the topic is not listed to her, describing it or the cluster is 403
    alice = _basic("alice", "alice-secret")
    listed = get(port, "/topics", headers=alice)
    assert listed.status == 200 and "secret" not in listed.text
    assert get(port, "/topics/secret", headers=alice).status == 403
    assert get(port, "/", headers=alice).status == 403
    # monitoring stays open
    assert get(port, "/v1/health/live").status == 200
