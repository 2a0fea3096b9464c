"""Every hook is documented in docs/HOOKS.md and exercised here through a real broker."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from pydmq.plugins import hookspecs
from pydmq.plugins.host import DuplicateRegistrationError, PluginHost
from pydmq.plugins.markers import hookimpl
from pydmq.storage.api import StorageEngineSpec
from pydmq.testing import EmbeddedBroker

DOC = Path(__file__).resolve().parents[3] / "docs" / "HOOKS.md"
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("pydmq_"))


def test_every_hook_has_a_documented_section() -> None:
    sections = set(re.findall(r"^## (\w+)", DOC.read_text(), re.MULTILINE))
    documented = {name for s in sections for name in re.split(r"\W+", s)}
    text = DOC.read_text()
    missing = [h for h in HOOKS if h not in documented and f"`{h}(" not in text]
    assert not missing, f"hooks without a section in docs/HOOKS.md: {missing}"


def test_every_hook_has_a_docstring_with_called_line() -> None:
    for name in HOOKS:
        doc = getattr(hookspecs, name).__doc__ or ""
        assert "Called:" in doc and "versionadded" in doc, name


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    @hookimpl
    def pydmq_configure(self, config: dict[str, str]) -> None:
        self.calls.append(("configure", config["num.partitions"]))

    @hookimpl
    def pydmq_broker_startup(self, broker: object) -> None:
        self.calls.append(("startup", type(broker).__name__))

    @hookimpl
    def pydmq_broker_shutdown(self, broker: object) -> None:
        self.calls.append(("shutdown", type(broker).__name__))

    @hookimpl
    def pydmq_on_topic_created(self, topic: str, topic_id: str, partitions: int) -> None:
        self.calls.append(("created", (topic, partitions)))

    @hookimpl
    def pydmq_on_topic_deleted(self, topic: str, topic_id: str) -> None:
        self.calls.append(("deleted", topic))


def test_lifecycle_and_topic_hooks_fire(tmp_path: Path) -> None:
    import asyncio

    from pydmq.config import BrokerConfig
    from pydmq.node import Node

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from support.admin_requests import delete

    recorder = Recorder()

    async def run() -> None:
        config = BrokerConfig(
            {
                "log.dirs": str(tmp_path),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "pydmq.http.listeners": "http://127.0.0.1:0",
                "num.partitions": 2,
            }
        )
        node = Node(config, plugins=[recorder])
        broker = node.broker
        assert broker is not None
        await node.start()
        broker.topic_creator.create_topic("hooked")
        [deleted] = await delete(broker, ["hooked"])
        assert deleted.error_code == 0
        await node.stop()

    asyncio.run(run())
    assert recorder.calls == [
        ("configure", "2"),
        ("startup", "Broker"),
        ("created", ("hooked", 2)),
        ("deleted", "hooked"),
        ("shutdown", "Broker"),
    ]


def test_builtin_registrations_and_entry_point_engine() -> None:
    host = PluginHost()
    engines = host.storage_engines()
    assert {"segment", "memory"} <= set(engines)
    handlers = host.api_handlers()
    assert {0, 1, 2, 3, 18, 22} <= set(handlers)
    # plugins/pydmq-sqlite is installed as its own distribution and found by entry point
    assert "sqlite" in engines


def test_duplicate_engine_name_is_an_error() -> None:
    class Duplicate:
        @hookimpl
        def pydmq_register_storage_engines(self) -> list[StorageEngineSpec]:
            from pydmq.engines.memory import MemoryStorageEngine

            return [StorageEngineSpec("memory", MemoryStorageEngine)]

    with pytest.raises(DuplicateRegistrationError):
        PluginHost([Duplicate()]).storage_engines()


def test_misspelled_hook_is_rejected() -> None:
    from pluggy import PluginValidationError

    class Typo:
        @hookimpl
        def pydmq_register_storage_engine(self) -> list[StorageEngineSpec]:
            return []

    with pytest.raises(PluginValidationError):
        PluginHost([Typo()])


def test_topic_on_sqlite_engine_through_kafka_client(tmp_path: Path) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedBroker(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = NewTopic("on-sqlite", 1, 1, config={"pydmq.engine": "sqlite"})
        for future in admin.create_topics([topic]).values():
            future.result(10)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(50):
            producer.produce("on-sqlite", value=b"v%d" % i)
        assert producer.flush(10) == 0
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False}
        )
        consumer.assign([confluent_kafka.TopicPartition("on-sqlite", 0, 0)])
        values = []
        for _ in range(50):
            msg = consumer.poll(5)
            assert msg is not None and not msg.error()
            values.append(msg.value())
        consumer.close()
        assert values == [b"v%d" % i for i in range(50)]
    assert (tmp_path / "data" / "engine-sqlite").is_dir()


class EverythingToFirst:
    """A third-party-style assignor: every subscribed partition to the smallest member id."""

    def assign(self, spec: Any) -> dict[str, dict[Any, frozenset[int]]]:
        first = min(spec.members)
        return {first: {t: frozenset(range(meta.partitions)) for t, meta in spec.topics.items()}}


class AssignorPlugin:
    @hookimpl
    def pydmq_register_group_assignors(self) -> list[Any]:
        from pydmq.assignment import GroupAssignorSpec

        return [GroupAssignorSpec("everything-to-first", EverythingToFirst(), "test")]


def test_group_assignor_hook_registers_third_party_assignor(tmp_path: Path) -> None:
    import asyncio

    from pydmq.config import BrokerConfig
    from pydmq.groups.consumer.api import HeartbeatRequest
    from pydmq.node import Node
    from pydmq.protocol.errors import ErrorCode

    assignors = PluginHost([AssignorPlugin()]).group_assignors()
    assert list(assignors)[:2] == ["uniform", "range"]
    assert "everything-to-first" in assignors

    async def run() -> None:
        config = BrokerConfig(
            {
                "log.dirs": str(tmp_path),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "pydmq.http.listeners": "http://127.0.0.1:0",
            }
        )
        node = Node(config, plugins=[AssignorPlugin()])
        broker = node.broker
        assert broker is not None
        await node.start()
        try:
            broker.topic_creator.create_topic("assigned", num_partitions=3)
            groups = broker.group_coordinator

            def join(member: str) -> Any:
                return groups.consumer_group_heartbeat(
                    HeartbeatRequest(
                        "g",
                        member,
                        0,
                        rebalance_timeout_ms=1000,
                        subscribed_topic_names=["assigned"],
                        server_assignor="everything-to-first",
                        topic_partitions={},
                    )
                ).result()

            b = join("b")
            a = join("a")
            assert b.error_code == a.error_code == ErrorCode.NONE
            group = groups.consumer_groups["g"]
            assert groups.consumer.assignor_for(group) == "everything-to-first"
            assert {m: sum(map(len, p.values())) for m, p in group.target.items()} == {
                "a": 3,
                "b": 0,
            }
            unknown = groups.consumer_group_heartbeat(
                HeartbeatRequest(
                    "g",
                    "c",
                    0,
                    rebalance_timeout_ms=1000,
                    subscribed_topic_names=[],
                    server_assignor="nope",
                    topic_partitions={},
                )
            ).result()
            assert unknown.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
        finally:
            await node.stop()

    asyncio.run(run())


def test_duplicate_assignor_name_is_an_error() -> None:
    class Duplicate:
        @hookimpl
        def pydmq_register_group_assignors(self) -> list[Any]:
            from pydmq.assignment import GroupAssignorSpec, UniformAssignor

            return [GroupAssignorSpec("uniform", UniformAssignor())]

    with pytest.raises(DuplicateRegistrationError):
        PluginHost([Duplicate()]).group_assignors()


def test_authorizer_hook_registers_third_party_authorizer(tmp_path: Path) -> None:
    """A plugin's authorizer, picked by ``authorizer.class.name``, decides every request."""
    from pydmq.protocol.acl import AclOperation, ResourceType
    from pydmq.protocol.errors import ErrorCode
    from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
    from pydmq.security.authorizer import AuthorizerSpec
    from pydmq.security.principal import KafkaPrincipal
    from pydmq.security.standard_authorizer import StandardAuthorizer

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from support.raw_client import RawClient

    asked: list[tuple[str, AclOperation, ResourceType, str]] = []

    class OnlyPublicTopics(StandardAuthorizer):
        def authorize(
            self,
            principal: KafkaPrincipal,
            host: str,
            operation: AclOperation,
            resource_type: ResourceType,
            resource_name: str,
        ) -> bool:
            asked.append((str(principal), operation, resource_type, resource_name))
            return resource_type != ResourceType.TOPIC or resource_name.startswith("public-")

    class Plugin:
        @hookimpl
        def pydmq_register_authorizers(self) -> list[AuthorizerSpec]:
            return [AuthorizerSpec("only-public", OnlyPublicTopics.from_config)]

    assert "only-public" in PluginHost([Plugin()]).authorizers()
    with pytest.raises(DuplicateRegistrationError):

        class Again:
            @hookimpl
            def pydmq_register_authorizers(self) -> list[AuthorizerSpec]:
                return [AuthorizerSpec("only-public", OnlyPublicTopics.from_config)]

        PluginHost([Plugin(), Again()]).authorizers()
    overrides = {"authorizer.class.name": "only-public"}
    with EmbeddedBroker(tmp_path / "d", overrides=overrides, plugins=[Plugin()]) as broker:
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=n) for n in ("public-a", "secret")],
            allow_auto_topic_creation=False,
        )
        with RawClient(broker.bootstrap) as client:
            topics = client.request(3, 12, request).body.topics
    assert {t.name: t.error_code for t in topics} == {
        "public-a": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    assert ("User:ANONYMOUS", AclOperation.DESCRIBE, ResourceType.TOPIC, "secret") in asked


class StaticTokens:
    """A third-party OAUTHBEARER validator: one fixed token per principal, from JAAS options."""

    @hookimpl
    def pydmq_register_oauthbearer_validators(self) -> list[Any]:
        from pydmq.security.sasl.oauthbearer import (
            OAuthBearerToken,
            OAuthBearerValidatorSpec,
            TokenValidationError,
        )

        class Validator:
            def __init__(self, options: Any) -> None:
                self.tokens = {v: k.removeprefix("token_") for k, v in options.items()}

            def validate(self, token: str) -> OAuthBearerToken:
                if token not in self.tokens:
                    raise TokenValidationError("unknown token")
                return OAuthBearerToken(self.tokens[token], 4_000_000_000_000, frozenset())

        return [OAuthBearerValidatorSpec("static", Validator)]


def test_oauthbearer_validator_hook_authenticates_with_a_plugins_validator(
    tmp_path: Path,
) -> None:
    import time

    import confluent_kafka

    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "pydmq.sasl.oauthbearer.validator": "static",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'token_zed="letmein";'
        ),
    }
    with EmbeddedBroker(tmp_path / "data", overrides=overrides, plugins=[StaticTokens()]) as b:
        results: dict[str, list[Any]] = {}
        for token in ("letmein", "guess"):
            errors: list[Any] = []
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": b.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "OAUTHBEARER",
                    "oauth_cb": lambda _c, t=token: (t, time.time() + 3600, "zed", {}),
                    "error_cb": errors.append,
                    "message.timeout.ms": 5000,
                }
            )
            producer.produce("hooked", b"x")
            producer.flush(10)
            results[token] = errors
        assert not [e for e in results["letmein"] if e.code() == -169]
        assert any(e.code() == -169 for e in results["guess"])  # _AUTHENTICATION


def test_unknown_oauthbearer_validator_stops_the_node(tmp_path: Path) -> None:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "pydmq.sasl.oauthbearer.validator": "nope",
    }
    with pytest.raises(Exception, match="failed to start") as info:
        EmbeddedBroker(tmp_path / "data", overrides=overrides).start(10)
    assert "nope" in str(info.value.__cause__)
