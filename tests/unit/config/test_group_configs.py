"""pydmq.config.group_configs: Kafka's GroupConfig rules for GROUP config resources."""

from __future__ import annotations

import pytest

from pydmq.config.definitions import ConfigError
from pydmq.config.group_configs import (
    auto_offset_reset_duration_ms,
    check_group_configs,
    effective_group_configs,
)


def test_auto_offset_reset_values() -> None:
    assert auto_offset_reset_duration_ms("latest") is None
    assert auto_offset_reset_duration_ms("EARLIEST") is None
    assert auto_offset_reset_duration_ms("by_duration:PT1H") == 3_600_000
    assert auto_offset_reset_duration_ms("by_duration:P1DT2M3.5S") == 86_400_000 + 123_500
    for bad in ("by_duration:", "by_duration:PT", "by_duration:-PT1S", "by_duration:1H", "x"):
        with pytest.raises(ConfigError):
            auto_offset_reset_duration_ms(bad)


def test_bounds_come_from_the_broker() -> None:
    check_group_configs({"share.record.lock.duration.ms": "60000"}, {})
    with pytest.raises(ConfigError, match="less than or equal to"):
        check_group_configs({"share.record.lock.duration.ms": "60001"}, {})
    wider = {"group.share.max.record.lock.duration.ms": "90000"}
    check_group_configs({"share.record.lock.duration.ms": "90000"}, wider)
    with pytest.raises(ConfigError, match=r"must be less than consumer\.session\.timeout\.ms"):
        check_group_configs(
            {"consumer.heartbeat.interval.ms": "50000"},
            {"group.consumer.max.heartbeat.interval.ms": "60000"},
        )


def test_effective_values() -> None:
    values = effective_group_configs(
        {"share.auto.offset.reset": "earliest"}, {"group.share.session.timeout.ms": "50000"}
    )
    assert values["share.auto.offset.reset"] == "earliest"
    assert values["share.session.timeout.ms"] == "50000"
    assert values["share.heartbeat.interval.ms"] == "5000"
