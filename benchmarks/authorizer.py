"""What authorization costs: produce and consume with the StandardAuthorizer on vs off.

Two pydmq brokers in the same run: one without an authorizer, one with the StandardAuthorizer
where User:ANONYMOUS (the benchmark's principal over PLAINTEXT) is not a super user and is
allowed by ACLs (ALL on the topics ``bench-*``, IDEMPOTENT_WRITE on the cluster, READ on the
groups ``bench-*``), among 1,000 other ACLs. Rounds alternate between the two brokers; each
produces N records of one size to a fresh topic with confluent-kafka and consumes them back.
The medians and their ratio (on/off) are printed, and a micro-benchmark of the authorizer's
decisions in process: a cached decision (what Produce and Fetch pay per topic) and an
uncached one.

    python benchmarks/authorizer.py                      # 300,000 x 100 B, 3 rounds
    python benchmarks/authorizer.py --records 100000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import wait_listening  # noqa: E402
from benchmarks.produce_consume import consume, produce  # noqa: E402

from pydmq.client import KafkaClient  # noqa: E402
from pydmq.protocol.acl import (  # noqa: E402
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from pydmq.protocol.messages.create_acls import AclCreation, CreateAclsRequest  # noqa: E402
from pydmq.security.principal import KafkaPrincipal  # noqa: E402
from pydmq.security.standard_authorizer import STANDARD_AUTHORIZER, StandardAuthorizer  # noqa: E402
from pydmq.testing.process import free_port  # noqa: E402

OTHER_ACLS = 1_000


def serve(data_dir: str, overrides: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "pydmq", "serve", "--listeners",
               f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", data_dir, "--log-level", "WARNING"]  # fmt: skip
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "33554432",
           "MALLOC_TRIM_THRESHOLD_": "134217728"}  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(proc, port, started, poll_s=0.01)
    return proc, f"127.0.0.1:{port}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(30)


def acl(rtype: ResourceType, name: str, op: AclOperation, pattern: PatternType, principal: str,
        ) -> AclCreation:  # fmt: skip
    return AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                       principal=principal, host="*", operation=op,
                       permission_type=AclPermissionType.ALLOW)  # fmt: skip


def grant(bootstrap: str) -> None:
    """The benchmark's ACLs, and 1,000 others, created while User:ANONYMOUS is a super user."""
    anonymous = "User:ANONYMOUS"
    creations = [
        acl(ResourceType.TOPIC, "bench-", AclOperation.ALL, PatternType.PREFIXED, anonymous),
        acl(ResourceType.GROUP, "bench-", AclOperation.READ, PatternType.PREFIXED, anonymous),
        acl(
            ResourceType.CLUSTER,
            "kafka-cluster",
            AclOperation.IDEMPOTENT_WRITE,
            PatternType.LITERAL,
            anonymous,
        ),
        acl(
            ResourceType.CLUSTER,
            "kafka-cluster",
            AclOperation.CREATE,
            PatternType.LITERAL,
            anonymous,
        ),
    ]
    creations += [
        acl(
            ResourceType.TOPIC,
            f"team-{i}-",
            AclOperation.READ,
            PatternType.PREFIXED,
            f"User:user{i}",
        )
        for i in range(OTHER_ACLS)
    ]
    with KafkaClient(bootstrap, client_id="bench-acls", timeout=60) as client:
        response = client.send(30, CreateAclsRequest(creations=creations))
    assert all(r.error_code == 0 for r in response.results), response


def micro() -> None:
    authorizer = StandardAuthorizer(frozenset(), False)
    acls = {
        uuid.uuid4(): StandardAcl(
            ResourceType.TOPIC,
            f"team-{i}-",
            PatternType.PREFIXED,
            f"User:user{i}",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        for i in range(OTHER_ACLS)
    }
    acls[uuid.uuid4()] = StandardAcl(ResourceType.TOPIC, "bench-", PatternType.PREFIXED,
                                     "User:ANONYMOUS", "*", AclOperation.ALL,
                                     AclPermissionType.ALLOW)  # fmt: skip
    authorizer.update_acls(acls)
    who = KafkaPrincipal.parse("User:ANONYMOUS")
    calls = 1_000_000
    started = time.perf_counter()
    for _ in range(calls):
        authorizer.authorize(who, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, "bench-a")
    cached = (time.perf_counter() - started) / calls
    names = [f"bench-{i}" for i in range(2_000)]
    started = time.perf_counter()
    for name in names:
        authorizer.authorize(who, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, name)
    uncached = (time.perf_counter() - started) / len(names)
    print(f"authorize, cached decision:   {cached * 1e9:8.0f} ns")
    print(f"authorize, uncached ({OTHER_ACLS + 1} ACLs, {OTHER_ACLS + 1} prefixed): "
          f"{uncached * 1e6:8.1f} us")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acks", default="1")
    args = parser.parse_args()
    micro()
    root = Path(tempfile.mkdtemp(prefix="pydmq-bench-authz-"))
    on_dir, off_dir = str(root / "on"), str(root / "off")
    authz = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
    proc, bootstrap = serve(on_dir, authz)
    try:
        grant(bootstrap)
    finally:
        stop(proc)
    brokers = {
        "on": serve(on_dir, {**authz, "super.users": "User:admin"}),
        "off": serve(off_dir, {}),
    }
    results: dict[str, dict[str, list[float]]] = {
        name: {"produce": [], "consume": []} for name in brokers
    }
    try:
        for round_ in range(args.rounds):
            order = ["on", "off"] if round_ % 2 == 0 else ["off", "on"]
            for name in order:
                _, address = brokers[name]
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                produced = produce(address, topic, args.records, args.size, args.acks)
                assert produced["errors"] == 0, produced
                consumed = consume(address, topic, args.records, args.size)
                assert consumed["seen"] == args.records, consumed
                results[name]["produce"].append(produced["records_s"])
                results[name]["consume"].append(consumed["records_s"])
                print(f"round {round_} authorizer {name:3}: produce "
                      f"{produced['records_s']:>10,.0f} rec/s  consume "
                      f"{consumed['records_s']:>10,.0f} rec/s", flush=True)  # fmt: skip
    finally:
        for proc, _ in brokers.values():
            stop(proc)
        shutil.rmtree(root, ignore_errors=True)
    for what in ("produce", "consume"):
        on = statistics.median(results["on"][what])
        off = statistics.median(results["off"][what])
        print(f"{what}: {args.records:,} x {args.size} B, median of {args.rounds}: "
              f"off {off:,.0f} rec/s, on {on:,.0f} rec/s, on/off {on / off:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
