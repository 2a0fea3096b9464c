"""``pydmq cluster up N --secure``: a throwaway CA and credentials for a local secure cluster.

Under ``<data dir>/secure/`` (made at the first ``--secure`` start, reused by the next ones,
because the SCRAM user lives in the cluster's metadata from that first start on):

- ``ca.pem``, and ``node.pem`` (key and chain, one PEM file; subject ``CN=pydmq-node``; valid
  365 days for 127.0.0.1, localhost and the bind host), shared by every node;
- ``credentials.json``: the generated passwords (mode 0600);
- ``client.properties`` for Kafka's tools, Java clients and ``pydmq ... --command-config``,
  and ``librdkafka.properties`` for kcat (``-F``) and confluent-kafka.

The nodes' listeners: clients on SASL_SSL with SCRAM-SHA-512 (the user ``admin``, created
with the new cluster's bootstrap records through ``--add-scram``), the controller and
control-plane listeners on SSL with client certificates required (the nodes' own,
``User:CN=pydmq-node``), and replica fetches on the client listener as the PLAIN user
``broker``. Kafka's StandardAuthorizer is on with ``allow.everyone.if.no.acl.found=false``:
only ``admin``, ``broker`` and the nodes' certificate are super users, so every other user needs
ACLs (``pydmq acls``).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SecureSetup", "secure_setup"]

NODE_SUBJECT = "CN=pydmq-node"
ADMIN = "admin"
BROKER = "broker"
MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class SecureSetup:
    overrides: dict[str, str]
    """Properties for every node."""
    serve_args: list[str]
    """More ``pydmq serve`` arguments for every node (the bootstrap SCRAM user)."""
    client_properties: Path
    librdkafka_properties: Path


def _credentials(directory: Path) -> dict[str, str]:
    path = directory / "credentials.json"
    if path.exists():
        loaded: dict[str, str] = json.loads(path.read_text())
        return loaded
    made = {ADMIN: secrets.token_urlsafe(18), BROKER: secrets.token_urlsafe(18)}
    path.touch(mode=0o600)
    path.write_text(json.dumps(made, indent=1) + "\n")
    return made


def _certificates(directory: Path, host: str) -> tuple[Path, Path]:
    """(CA certificate, node key and chain), made unless both are there."""
    ca_pem, node_pem = directory / "ca.pem", directory / "node.pem"
    if ca_pem.exists() and node_pem.exists():
        return ca_pem, node_pem
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    from pydmq.testing.tls import TestCA

    ca = TestCA(directory, name="pydmq cluster up CA", valid_days=365)
    hosts = tuple(dict.fromkeys(("127.0.0.1", "localhost", host)))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pydmq-node")])
    identity = ca.issue("node", subject=subject, hosts=hosts)
    os.chmod(identity.pem, 0o600)
    return ca.pem, identity.pem


def _jaas(module: str, user: str, password: str, extra: str = "") -> str:
    return f'{module} required username="{user}" password="{password}"{extra};'


def secure_setup(data_dir: Path, host: str) -> SecureSetup:
    """Make (or reuse) the material under ``data_dir/secure`` and say how to use it."""
    directory = data_dir / "secure"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    passwords = _credentials(directory)
    ca_pem, node_pem = _certificates(directory, host)
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    broker_password = passwords[BROKER]
    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SSL,CONTROL_PLANE:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(node_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_pem),
        "ssl.client.auth": "required",
        "listener.name.plaintext.ssl.client.auth": "none",
        "sasl.enabled.mechanisms": f"{MECHANISM},PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": _jaas(
            plain, BROKER, broker_password, f' user_{BROKER}="{broker_password}"'
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN};User:{BROKER};User:{NODE_SUBJECT}",
        "allow.everyone.if.no.acl.found": "false",
    }
    admin_password = passwords[ADMIN]
    client = directory / "client.properties"
    client.write_text(
        "# pydmq cluster up --secure: Kafka's tools, Java clients, pydmq --command-config\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={MECHANISM}\n"
        f"sasl.jaas.config={_jaas(scram, ADMIN, admin_password)}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca_pem}\n"
    )
    librdkafka = directory / "librdkafka.properties"
    librdkafka.write_text(
        "# pydmq cluster up --secure: kcat -F, confluent-kafka\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanisms={MECHANISM}\n"
        f"sasl.username={ADMIN}\n"
        f"sasl.password={admin_password}\n"
        f"ssl.ca.location={ca_pem}\n"
    )
    for path in (client, librdkafka):
        os.chmod(path, 0o600)
    seed = f"{MECHANISM}=[name={ADMIN},password={admin_password}]"
    return SecureSetup(overrides, ["--add-scram", seed], client, librdkafka)
