"""SASL, differential: pydmq and the reference Apache Kafka 4.4, configured with the same
JAAS users and SCRAM credentials, answer good and bad credentials and mechanisms alike.

Both get a SASL_PLAINTEXT client listener (Kafka's PlainLoginModule users, SCRAM users from
``kafka-storage.sh format --add-scram`` and ``pydmq serve --add-scram``), and the same raw
exchanges; the observation is each step's error code, the final message, the handshake's
mechanism list and whether the connection is closed afterwards.

One documented difference is left out of the comparison: for a SCRAM user that does not
exist Kafka fails at the client's first message, pydmq at its proof (with the same error and
message), so that the step does not tell whether the user exists (RFC 5802 §5.1).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pydmq.protocol.messages.sasl_handshake import SaslHandshakeRequest
from pydmq.security.sasl.client import sasl_client
from support.raw_client import RawClient

from .differential_support import ReferenceKafka, diff_paths, reference_kafka_unavailable
from .sasl_support import JAAS_PLAIN, SaslBrokerProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
SCRAM = [
    "SCRAM-SHA-256=[name=bob,password=bob-secret]",
    "SCRAM-SHA-512=[name=bob,password=bob-secret]",
]


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    why = reference_kafka_unavailable()
    if why is not None:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("sasl-diff")
    props = root / "sasl.properties"
    props.write_text(
        "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        f"sasl.enabled.mechanisms={MECHANISMS}\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        "connections.max.reauth.ms=600000\n"
        f"listener.name.plaintext.plain.sasl.jaas.config={JAAS_PLAIN}\n"
        + "".join(
            f"listener.name.plaintext.{m.lower()}.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        )
    )
    format_args = root / "format.args"
    format_args.write_text("".join(f"--add-scram\n{s}\n" for s in SCRAM))
    (root / "kafka").mkdir()
    kafka = ReferenceKafka(
        {},
        root / "kafka",
        {"KAFKA_EXTRA_PROPS_FILE": str(props), "KAFKA_FORMAT_ARGS_FILE": str(format_args)},
    ).start()
    pydmq = SaslBrokerProcess(
        root / "pydmq" / "data",
        {"sasl.enabled.mechanisms": MECHANISMS, "connections.max.reauth.ms": "600000"},
        extra_args=tuple(arg for s in SCRAM for arg in ("--add-scram", s)),
    )
    try:
        pydmq.start()
        _wait_for_api_versions(kafka.bootstrap, 90, kafka)
        yield {"kafka": kafka.bootstrap, "pydmq": pydmq.bootstrap}
    finally:
        pydmq.stop()
        kafka.stop()
        kafka.cleanup()


def _wait_for_api_versions(bootstrap: str, timeout: float, kafka: ReferenceKafka) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not kafka.alive():
            raise RuntimeError(f"reference Kafka exited:\n{kafka.log_tail()}")
        try:
            with RawClient(bootstrap, timeout=3) as client:
                client.request(18, 2)
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"reference Kafka did not start:\n{kafka.log_tail()}")


def observe(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    """Handshake, the whole exchange, then a Metadata request: what each step answered."""
    out: dict[str, Any] = {}
    with RawClient(bootstrap, timeout=10) as client:
        handshake = client.request(17, 1, SaslHandshakeRequest(mechanism=mechanism)).body
        out["handshake"] = [handshake.error_code, sorted(handshake.mechanisms)]
        if handshake.error_code:
            out["closed"] = client.wait_closed()
            return out
        sasl = sasl_client(mechanism, user, password)
        message: bytes | None = sasl.first_message()
        codes: list[int] = []
        while message is not None:
            answer = client.request(36, 2, SaslAuthenticateRequest(auth_bytes=message)).body
            codes.append(answer.error_code)
            if answer.error_code:
                out["message"] = answer.error_message
                break
            out["session_lifetime"] = answer.session_lifetime
            message = sasl.evaluate_challenge(answer.auth_bytes)
        out["final_error"] = codes[-1]
        out["steps"] = codes
        if codes[-1] == ErrorCode.NONE:
            out["metadata_brokers"] = len(
                client.request(3, 12, MetadataRequest(topics=None)).body.brokers
            )
        else:
            out["closed"] = client.wait_closed()
    return out


CASES = {
    "plain-good": ("PLAIN", "alice", "alice-secret"),
    "plain-wrong-password": ("PLAIN", "alice", "nope"),
    "plain-unknown-user": ("PLAIN", "mallory", "alice-secret"),
    "scram256-good": ("SCRAM-SHA-256", "bob", "bob-secret"),
    "scram256-wrong-password": ("SCRAM-SHA-256", "bob", "nope"),
    "scram512-good": ("SCRAM-SHA-512", "bob", "bob-secret"),
    "scram512-wrong-password": ("SCRAM-SHA-512", "bob", "nope"),
    "scram512-unknown-user": ("SCRAM-SHA-512", "mallory", "bob-secret"),
    "gssapi": ("GSSAPI", "alice", "x"),
    "oauthbearer-not-enabled": ("OAUTHBEARER", "alice", "x"),
}
# Where the user's existence would show (see the module docstring).
_UNKNOWN_USER_STEPS = {"scram512-unknown-user": ("steps", "session_lifetime")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_answers(targets: dict[str, str], case: str) -> None:
    mechanism, user, password = CASES[case]
    if mechanism in ("GSSAPI", "OAUTHBEARER"):
        seen = {
            name: _observe_handshake_only(bootstrap, mechanism)
            for name, bootstrap in targets.items()
        }
    else:
        seen = {
            name: observe(bootstrap, mechanism, user, password)
            for name, bootstrap in targets.items()
        }
    for key in _UNKNOWN_USER_STEPS.get(case, ()):
        for obs in seen.values():
            obs.pop(key, None)
    print(f"{case}: kafka {seen['kafka']}\n{case}: pydmq {seen['pydmq']}")
    assert not diff_paths(seen["kafka"], seen["pydmq"]), diff_paths(seen["kafka"], seen["pydmq"])


def _observe_handshake_only(bootstrap: str, mechanism: str) -> dict[str, Any]:
    with RawClient(bootstrap, timeout=10) as client:
        answer = client.request(17, 1, SaslHandshakeRequest(mechanism=mechanism)).body
        return {
            "handshake": [answer.error_code, sorted(answer.mechanisms)],
            "closed": client.wait_closed(),
        }


def test_requests_before_authentication_close_on_both(targets: dict[str, str]) -> None:
    for name, bootstrap in targets.items():
        with RawClient(bootstrap, timeout=10) as client:
            client.send_request_no_response(3, 12, MetadataRequest(topics=None))
            assert client.wait_closed(), name
