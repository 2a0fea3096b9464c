"""Cluster-mode configs: definitions, the typed accessors and the cross-key checks."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pydmq.cli.serve import build_config
from pydmq.config.broker import BROKER_CONFIGS, BrokerConfig, parse_quorum_voters
from pydmq.config.definitions import ConfigError, ConfigType
from pydmq.config.topic import TOPIC_CONFIGS, TopicConfig, validate_topic_configs

CLUSTER_DEFAULTS = {
    "process.roles": ["broker", "controller"],
    "node.id": 1,
    "controller.quorum.voters": [],
    "controller.listener.names": ["CONTROLLER"],
    "inter.broker.listener.name": "PLAINTEXT",
    "broker.rack": None,
    "broker.session.timeout.ms": 9000,
    "broker.heartbeat.interval.ms": 2000,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "metadata.log.max.snapshot.interval.records": 10000,
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.max.bytes": 1048576,
    "default.replication.factor": 1,
    "offsets.topic.replication.factor": 3,
    "unclean.leader.election.enable": False,
}

VOTERS = "1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094"
LISTENERS = "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19092"


def test_broker_defaults_match_the_contract() -> None:
    defs = {d.name: d for d in BROKER_CONFIGS}
    assert {name: defs[name].default for name in CLUSTER_DEFAULTS} == CLUSTER_DEFAULTS
    assert defs["replica.lag.time.max.ms"].type == ConfigType.LONG
    assert defs["broker.session.timeout.ms"].type == ConfigType.INT
    assert defs["offsets.topic.replication.factor"].type == ConfigType.SHORT
    assert all(defs[n].read_only for n in ("controller.quorum.voters", "process.roles"))


def test_topic_configs() -> None:
    defs = {d.name: d for d in TOPIC_CONFIGS}
    assert defs["unclean.leader.election.enable"].default is False
    assert defs["pydmq.replication.strategy"].default == "isr"
    assert validate_topic_configs({"pydmq.replication.strategy": "quorum"}) == {
        "pydmq.replication.strategy": "quorum"
    }
    assert validate_topic_configs({"unclean.leader.election.enable": "true"}) == {
        "unclean.leader.election.enable": True
    }
    with pytest.raises(ConfigError):
        validate_topic_configs({"pydmq.replication.strategy": "Not A Name"})
    broker = BrokerConfig({"unclean.leader.election.enable": "true"})
    topic = TopicConfig(broker, {})
    assert topic.get("pydmq.replication.strategy") == "isr"
    assert topic.get("unclean.leader.election.enable") is True
    assert topic.source_of("unclean.leader.election.enable") == "STATIC_BROKER_CONFIG"
    assert (
        TopicConfig(broker, {"pydmq.replication.strategy": "quorum"}).get_str(
            "pydmq.replication.strategy"
        )
        == "quorum"
    )


def test_single_node_accessors() -> None:
    config = BrokerConfig()
    assert config.process_roles == frozenset({"broker", "controller"})
    assert config.controller_quorum_voters == {}
    assert not config.is_cluster_mode
    assert config.controller_listener_names == ["CONTROLLER"]
    assert config.inter_broker_listener_name == "PLAINTEXT"
    config.check_cluster_mode()  # nothing to check


def test_cluster_accessors() -> None:
    config = BrokerConfig(
        {
            "process.roles": "broker",
            "node.id": "4",
            "controller.quorum.voters": VOTERS,
            "controller.listener.names": "CTRL,CTRL2",
        }
    )
    assert config.process_roles == frozenset({"broker"})
    assert config.controller_quorum_voters == {
        1: ("127.0.0.1", 19092),
        2: ("127.0.0.1", 19093),
        3: ("127.0.0.1", 19094),
    }
    assert config.is_cluster_mode
    assert config.controller_listener_names == ["CTRL", "CTRL2"]
    assert config.control_plane_listener_name == "CONTROL_PLANE"
    protocols = config.listener_security_protocols()
    assert protocols == {
        "PLAINTEXT": "PLAINTEXT",
        "CTRL": "PLAINTEXT",
        "CTRL2": "PLAINTEXT",
        "CONTROL_PLANE": "PLAINTEXT",
    }


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        (["1@h:1"], {1: ("h", 1)}),
        ([" 2@[::1]:9093 ", ""], {2: ("::1", 9093)}),
        (["3@[fe80::1%eth0]:65535"], {3: ("fe80::1%eth0", 65535)}),
        (
            ["10@broker-1.example.com:19092", "11@10.0.0.2:19092"],
            {10: ("broker-1.example.com", 19092), 11: ("10.0.0.2", 19092)},
        ),
    ],
)
def test_parse_quorum_voters(entries: list[str], expected: dict[int, tuple[str, int]]) -> None:
    assert parse_quorum_voters(entries) == expected


@pytest.mark.parametrize(
    "entry",
    [
        "h:1",
        "x@h:1",
        "1@h",
        "1@:1",
        "1@h:0",
        "1@h:70000",
        "1@::1:9093",
        "1@[::1]9093",
        "1@[::1",
        "-1@h:1",
        "1@h:port",
    ],
)
def test_parse_quorum_voters_rejects(entry: str) -> None:
    with pytest.raises(ConfigError):
        parse_quorum_voters([entry])
    with pytest.raises(ConfigError):
        BrokerConfig({"controller.quorum.voters": entry})


def test_duplicate_voter_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="twice"):
        BrokerConfig({"controller.quorum.voters": "1@a:1,1@b:2"})
    for name, value in (
        ("process.roles", "broker,zookeeper"),
        ("process.roles", ""),
        ("controller.listener.names", ""),
        ("inter.broker.listener.name", "no spaces allowed"),
        ("broker.session.timeout.ms", "0"),
        ("replica.fetch.max.bytes", "-1"),
        ("metadata.log.max.snapshot.interval.records", "0"),
    ):
        with pytest.raises(ConfigError):
            BrokerConfig({name: value})


def test_check_cluster_mode() -> None:
    ok = {"node.id": 1, "controller.quorum.voters": VOTERS, "listeners": LISTENERS}
    BrokerConfig(ok).check_cluster_mode()
    BrokerConfig(
        {**ok, "node.id": 7, "process.roles": "broker", "listeners": "PLAINTEXT://h:1"}
    ).check_cluster_mode()
    BrokerConfig(
        {**ok, "process.roles": "controller", "listeners": "CONTROLLER://h:1"}
    ).check_cluster_mode()
    BrokerConfig(
        {
            **ok,
            "control.plane.listener.name": "CP",
            "listeners": f"{LISTENERS},CP://h:3",
        }
    ).check_cluster_mode()
    bad = [
        ({**ok, "node.id": 9}, "not in controller.quorum.voters"),
        ({**ok, "listeners": "PLAINTEXT://h:1"}, "needs a CONTROLLER listener"),
        ({**ok, "process.roles": "broker"}, "lacks the controller role"),
        ({**ok, "inter.broker.listener.name": "CONTROLLER"}, "is a controller listener"),
        ({**ok, "listeners": "CONTROLLER://h:1"}, "not in listeners"),
        # KIP-291: a control-plane listener of its own, bound when named explicitly.
        ({**ok, "control.plane.listener.name": "CP"}, "CP is not in listeners"),
        ({**ok, "control.plane.listener.name": "PLAINTEXT"}, "must differ"),
        ({**ok, "control.plane.listener.name": "CONTROLLER"}, "must differ"),
    ]
    for values, message in bad:
        with pytest.raises(ConfigError, match=message):
            BrokerConfig(values).check_cluster_mode()


def _serve_args(**kwargs: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "config": None,
        "listeners": None,
        "advertised_listeners": None,
        "log_dirs": None,
        "node_id": None,
        "process_roles": None,
        "controller_quorum_voters": None,
        "http_listener": None,
        "override": [],
    }
    base.update(kwargs)
    return argparse.Namespace(**base)


def test_serve_accepts_cluster_keys_from_flags_files_and_overrides(tmp_path: Path) -> None:
    config = build_config(
        _serve_args(
            listeners=LISTENERS,
            node_id=1,
            process_roles="broker,controller",
            controller_quorum_voters=VOTERS,
            override=["broker.heartbeat.interval.ms=500", "controller.listener.names=CONTROLLER"],
        )
    )
    assert config.is_cluster_mode and config.get_int("broker.heartbeat.interval.ms") == 500

    props = tmp_path / "node.properties"
    props.write_text(
        f"node.id=2\ncontroller.quorum.voters={VOTERS}\nlisteners=PLAINTEXT://h:1,CONTROLLER://h:2\n"
        "replica.lag.time.max.ms=10000\n"
    )
    config = build_config(_serve_args(config=props))
    assert config.controller_quorum_voters[2] == ("127.0.0.1", 19093)
    assert config.get_int("replica.lag.time.max.ms") == 10000

    toml = tmp_path / "node.toml"
    toml.write_text(
        'node.id = 3\nlisteners = ["PLAINTEXT://h:1", "CONTROLLER://h:2"]\n'
        '[controller.quorum]\nvoters = ["1@a:1", "3@[::1]:2"]\nelection.timeout.ms = 300\n'
    )
    config = build_config(_serve_args(config=toml))
    assert config.controller_quorum_voters == {1: ("a", 1), 3: ("::1", 2)}
    assert config.get_int("controller.quorum.election.timeout.ms") == 300

    with pytest.raises(ConfigError, match=r"not in controller\.quorum\.voters"):
        build_config(_serve_args(listeners=LISTENERS, node_id=5, controller_quorum_voters=VOTERS))


def test_serve_parser_has_the_cluster_flags() -> None:
    from pydmq.cli import serve

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    serve.add_parser(sub)
    args = parser.parse_args(
        ["serve", "--process-roles", "broker", "--controller-quorum-voters", VOTERS]
    )
    assert (args.process_roles, args.controller_quorum_voters) == ("broker", VOTERS)
