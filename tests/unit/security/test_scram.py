"""SCRAM-SHA-256/512 server: RFC 7677's test vector, Kafka's checks, no user enumeration."""

from __future__ import annotations

import base64

import pytest

from pydmq.security.sasl.errors import SaslAuthenticationError
from pydmq.security.sasl.scram import (
    ScramCredential,
    ScramMechanism,
    ScramSaslServer,
    client_proof,
    escape_username,
    scram_credential,
    unescape_username,
)

pytestmark = pytest.mark.timeout(30)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
# RFC 7677 §3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(credentials: dict[str, ScramCredential] | None = None) -> ScramSaslServer:
    creds = {"user": scram_credential(SHA256, "pencil", RFC_SALT, 4096)}
    if credentials is not None:
        creds = credentials
    return ScramSaslServer(SHA256, lambda mech, user: creds.get(user), lambda: RFC_SERVER_NONCE)


def test_rfc7677_vector() -> None:
    server = rfc_server()
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete
    assert server.authorization_id == "user"


def test_rfc7677_proof_from_the_client_helper() -> None:
    auth = b",".join((RFC_CLIENT_FIRST[3:], RFC_SERVER_FIRST, RFC_CLIENT_FINAL.split(b",p=")[0]))
    proof = client_proof(SHA256, "pencil", RFC_SALT, 4096, auth)
    assert base64.b64encode(proof) == RFC_CLIENT_FINAL.split(b",p=")[1]


def exchange(
    server: ScramSaslServer,
    mechanism: ScramMechanism,
    user: str,
    password: str,
    gs2: str = "n,,",
) -> bytes:
    first_bare = f"n={escape_username(user)},r=clientnonce"
    server_first = server.evaluate_response(f"{gs2}{first_bare}".encode())
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    channel = base64.b64encode(gs2.encode()).decode()
    final_bare = f"c={channel},r={fields['r']}"
    auth = f"{first_bare},{server_first.decode()},{final_bare}".encode()
    proof = client_proof(mechanism, password, base64.b64decode(fields["s"]), int(fields["i"]), auth)
    return server.evaluate_response(f"{final_bare},p={base64.b64encode(proof).decode()}".encode())


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_both_mechanisms_accept_the_password(mechanism: ScramMechanism) -> None:
    cred = scram_credential(mechanism, "s3cr=t,", b"salt-bytes", 4096)
    server = ScramSaslServer(mechanism, lambda m, u: cred if u == "a=b,c" else None)
    final = exchange(server, mechanism, "a=b,c", "s3cr=t,")
    assert final.startswith(b"v=")
    assert server.complete and server.authorization_id == "a=b,c"


def test_wrong_password_and_unknown_user_fail_alike_at_the_proof() -> None:
    cred = scram_credential(SHA256, "right", b"salt", 4096)
    messages = []
    for user, password in (("alice", "wrong"), ("mallory", "right")):
        server = ScramSaslServer(SHA256, lambda m, u: cred if u == "alice" else None)
        with pytest.raises(SaslAuthenticationError) as info:
            exchange(server, SHA256, user, password)
        messages.append(str(info.value))
    assert messages[0] == messages[1] == "Authentication failed: Invalid user credentials"


def test_unknown_user_gets_a_stable_made_up_salt() -> None:
    def salt_of(user: str) -> str:
        server = ScramSaslServer(SHA256, lambda m, u: None)
        first = server.evaluate_response(f"n,,n={user},r=abc".encode()).decode()
        return first.split(",")[1]

    assert salt_of("ghost") == salt_of("ghost") != salt_of("other")


def test_iterations_below_4096_are_refused_like_a_wrong_password() -> None:
    cred = scram_credential(SHA256, "pw", b"salt", 1000)
    server = ScramSaslServer(SHA256, lambda m, u: cred)
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        exchange(server, SHA256, "alice", "pw")


@pytest.mark.parametrize(
    "first",
    [
        b"y,,n=user,r=abc",  # channel binding supported by the client: refused (n,, only)
        b"p=tls-unique,,n=user,r=abc",
        b"n,,n=,r=abc",
        b"n,,n=user",
        b"n,,n=us=er,r=abc",  # '=' not escaped
        b"n,,n=user,r=a,b",
        "n,,n=usér,r=abc".encode(),
        b"\xff\xfe",
        b"",
    ],
)
def test_malformed_client_first_is_refused(first: bytes) -> None:
    server = ScramSaslServer(SHA256, lambda m, u: None)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(first)


def test_authzid_must_be_the_user() -> None:
    server = rfc_server()
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        server.evaluate_response(b"n,a=admin,n=user,r=abc")
    server = rfc_server()
    assert exchange(server, SHA256, "user", "pencil", gs2="n,a=user,").startswith(b"v=")


def test_delegation_token_extension_is_refused() -> None:
    server = rfc_server()
    with pytest.raises(SaslAuthenticationError, match="delegation tokens"):
        server.evaluate_response(b"n,,n=user,r=abc,tokenauth=true")


def test_final_nonce_and_channel_binding_are_checked() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        server.evaluate_response(RFC_CLIENT_FINAL.replace(b"k0,p", b"k1,p"))
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError, match="channel binding"):
        server.evaluate_response(RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"))
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(RFC_CLIENT_FINAL[:-4] + b"AAA=")


def test_no_message_after_completion() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    server.evaluate_response(RFC_CLIENT_FINAL)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(RFC_CLIENT_FINAL)


def test_username_escapes_round_trip() -> None:
    assert escape_username("a=b,c") == "a=3Db=2Cc"
    assert unescape_username("a=3Db=2Cc") == "a=b,c"


def test_mechanism_ids_are_kafkas() -> None:
    assert ScramMechanism.by_name("SCRAM-SHA-256") is SHA256
    assert ScramMechanism.by_type(2) is SHA512
    assert ScramMechanism.by_name("SCRAM-SHA-1") is None


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_our_client_against_our_server(mechanism: ScramMechanism) -> None:
    from pydmq.security.sasl.client import sasl_client

    cred = scram_credential(mechanism, "pw", b"salt", 4096)
    server = ScramSaslServer(mechanism, lambda m, u: cred if u == "node" else None)
    client = sasl_client(mechanism.mechanism_name, "node", "pw")
    message: bytes | None = client.first_message()
    while message is not None:
        message = client.evaluate_challenge(server.evaluate_response(message))
    assert server.complete and server.authorization_id == "node"


def test_our_client_refuses_a_forged_server_signature() -> None:
    from pydmq.security.sasl.client import sasl_client

    cred = scram_credential(SHA256, "pw", b"salt", 4096)
    server = ScramSaslServer(SHA256, lambda m, u: cred)
    client = sasl_client("SCRAM-SHA-256", "node", "pw")
    final = client.evaluate_challenge(server.evaluate_response(client.first_message()))
    assert final is not None
    server.evaluate_response(final)
    with pytest.raises(SaslAuthenticationError, match="signature"):
        client.evaluate_challenge(b"v=" + base64.b64encode(b"\x00" * 32))
