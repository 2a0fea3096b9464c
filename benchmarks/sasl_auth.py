"""SASL authentication micro-benchmarks, in process: ``python benchmarks/sasl_auth.py``.

The server side of one whole exchange, driven by pydmq's own clients, no sockets:

- ``plain``: one PLAIN login (a constant-time compare);
- ``scram-sha-256`` / ``scram-sha-512``: one SCRAM login at 4,096 iterations (the server
  keeps StoredKey/ServerKey, so it never runs PBKDF2: the client does);
- ``scram-unknown-user``: a SCRAM login of a user without a credential (made-up salt, fails
  at the proof);
- ``client-scram-sha-512``: what the client side costs (PBKDF2 at 4,096 iterations; a node
  pays it once per connection to another node's SCRAM listener);
- ``gate``: the dispatcher's per-request check on an authenticated connection.

Prints the median and the minimum over ``--rounds`` rounds in CPU time per operation (the
machine may be shared); nothing is asserted (DESIGN.md section 7).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from pydmq.security.sasl.authenticator import SaslAuthenticator
from pydmq.security.sasl.client import sasl_client
from pydmq.security.sasl.errors import SaslAuthenticationError
from pydmq.security.sasl.mechanism import SaslServer
from pydmq.security.sasl.plain import PlainSaslServer
from pydmq.security.sasl.scram import ScramMechanism, ScramSaslServer, scram_credential

CREDENTIALS = {
    m: scram_credential(m, "bob-secret", b"0123456789abcdef", 4096) for m in ScramMechanism
}


def server_of(mechanism: str) -> SaslServer:
    if mechanism == "PLAIN":
        return PlainSaslServer({"alice": "alice-secret"})
    scram = ScramMechanism.by_name(mechanism)
    assert scram is not None
    return ScramSaslServer(scram, lambda m, u: CREDENTIALS[m] if u == "bob" else None)


def exchange_messages(mechanism: str, user: str, password: str) -> list[bytes]:
    """The client's messages of one exchange (computed once: the client's PBKDF2 is not the
    server's cost). A SCRAM final message needs the server's nonce, so the server's nonce is
    fixed for the measured servers."""
    client = sasl_client(mechanism, user, password)
    server = server_of_fixed(mechanism)
    out = [client.first_message()]
    message: bytes | None = out[0]
    while message is not None:
        try:
            challenge = server.evaluate_response(message)
        except SaslAuthenticationError:
            break
        message = client.evaluate_challenge(challenge)
        if message is not None:
            out.append(message)
    return out


def server_of_fixed(mechanism: str) -> SaslServer:
    if mechanism == "PLAIN":
        return server_of(mechanism)
    scram = ScramMechanism.by_name(mechanism)
    assert scram is not None
    return ScramSaslServer(
        scram, lambda m, u: CREDENTIALS[m] if u == "bob" else None, lambda: "fixed-nonce"
    )


def login(mechanism: str, messages: list[bytes]) -> Callable[[], None]:
    def run() -> None:
        auth = SaslAuthenticator([mechanism], server_of_fixed, lambda m: 0)
        auth.handshake(mechanism)
        for message in messages:
            auth.authenticate(message)

    return run


def measure(fn: Callable[[], object], n: int, rounds: int) -> tuple[float, float]:
    per_op = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(n):
            fn()
        per_op.append((time.process_time() - start) / n * 1e6)
    return statistics.median(per_op), min(per_op)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    cases: dict[str, Callable[[], None]] = {
        "plain": login("PLAIN", exchange_messages("PLAIN", "alice", "alice-secret")),
        "scram-sha-256": login(
            "SCRAM-SHA-256", exchange_messages("SCRAM-SHA-256", "bob", "bob-secret")
        ),
        "scram-sha-512": login(
            "SCRAM-SHA-512", exchange_messages("SCRAM-SHA-512", "bob", "bob-secret")
        ),
        "scram-unknown-user": login(
            "SCRAM-SHA-256",
            [b"n,,n=ghost,r=abc", b"c=biws,r=abcfixed-nonce,p=" + b"A" * 44],
        ),
    }
    authenticated = SaslAuthenticator(["PLAIN"], server_of_fixed, lambda m: 0)
    authenticated.handshake("PLAIN")
    authenticated.authenticate(b"\x00alice\x00alice-secret")

    def gate() -> None:
        authenticated.refusal(0)

    cases["gate"] = gate
    for name, fn in cases.items():
        median, best = measure(fn, args.n, args.rounds)
        what = "per request, call included" if name == "gate" else "server CPU per login"
        print(f"{name:22s} median {median:8.1f} us  min {best:8.1f} us  ({what})")
    client_median, client_best = measure(
        lambda: exchange_messages("SCRAM-SHA-512", "bob", "bob-secret"), 20, args.rounds
    )
    print(
        f"{'client-scram-sha-512':22s} median {client_median:8.1f} us  min {client_best:8.1f} us"
        "  (a whole exchange, client PBKDF2 included)"
    )


if __name__ == "__main__":
    main()
