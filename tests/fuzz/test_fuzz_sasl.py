"""Fuzzing the SASL parsers: the SCRAM, PLAIN and OAUTHBEARER servers and the JAAS parser.

A SASL server may only refuse hostile tokens with SaslAuthenticationError (the client gets
SASL_AUTHENTICATION_FAILED; the connection closes); nothing else may escape, and a mutated
token never authenticates. The JAAS parser may only raise JaasConfigError.
"""

from __future__ import annotations

import base64
import contextlib
import json

import pytest
from fuzz_harness import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_decoders import mutated

from pydmq.security.sasl.client import sasl_client
from pydmq.security.sasl.errors import SaslAuthenticationError
from pydmq.security.sasl.jaas import JaasConfigError, parse_jaas_config
from pydmq.security.sasl.oauthbearer import OAuthBearerSaslServer, UnsecuredJwsValidator
from pydmq.security.sasl.plain import PlainSaslServer
from pydmq.security.sasl.scram import ScramMechanism, ScramSaslServer, scram_credential

pytestmark = pytest.mark.timeout(120)

SHA256 = ScramMechanism.SCRAM_SHA_256
CREDENTIAL = scram_credential(SHA256, "pw", b"salt", 4096)
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="a\\"b" user_admin=\'x\' /* c */ user_bob=word.x-y;'
)


def scram_server() -> ScramSaslServer:
    return ScramSaslServer(SHA256, lambda m, u: CREDENTIAL, lambda: "servernonce")


def _valid_scram() -> tuple[bytes, bytes]:
    client = sasl_client("SCRAM-SHA-256", "alice", "pw")
    first = client.first_message()
    final = client.evaluate_challenge(scram_server().evaluate_response(first))
    assert final is not None
    return first, final


SCRAM_FIRST, SCRAM_FINAL = _valid_scram()


def _token() -> bytes:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    token = f"{part({'alg': 'none'})}.{part({'sub': 'alice', 'exp': 4e9})}."
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


@fuzz_settings(800)
@given(data=mutated(SCRAM_FIRST))
def test_scram_client_first(data: bytes) -> None:
    server = scram_server()
    with contextlib.suppress(SaslAuthenticationError):
        server.evaluate_response(data)
    assert not server.complete


@fuzz_settings(800)
@given(data=mutated(SCRAM_FINAL))
def test_scram_client_final(data: bytes) -> None:
    server = scram_server()
    server.evaluate_response(SCRAM_FIRST)
    try:
        server.evaluate_response(data)
    except SaslAuthenticationError:
        assert not server.complete
    else:  # only an edit outside the proof's meaning (none exists) could pass
        assert data == SCRAM_FINAL


@fuzz_settings(500)
@given(data=st.one_of(mutated(b"\x00alice\x00alice-secret"), st.binary(max_size=64)))
def test_plain(data: bytes) -> None:
    server = PlainSaslServer({"alice": "alice-secret"})
    try:
        server.evaluate_response(data)
    except SaslAuthenticationError:
        return
    assert data.endswith(b"\x00alice\x00alice-secret")


@fuzz_settings(800)
@given(data=mutated(_token()))
def test_oauthbearer(data: bytes) -> None:
    server = OAuthBearerSaslServer(UnsecuredJwsValidator({}, clock=lambda: 1_700_000_000_000))
    try:
        server.evaluate_response(data)
        if not server.complete:
            server.evaluate_response(b"\x01")
    except SaslAuthenticationError:
        return
    assert server.authorization_id


@fuzz_settings(1000)
@given(text=st.one_of(mutated(JAAS.encode()), st.binary(max_size=80)))
def test_jaas(text: bytes) -> None:
    try:
        entries = parse_jaas_config(text.decode("utf-8", "replace"))
    except JaasConfigError:
        return
    for entry in entries:
        assert entry.control_flag in ("required", "requisite", "sufficient", "optional")
