"""pytest plugin (entry point ``pytest11``): Kafka integration tests without Docker.

Fixtures:

- ``pydmq_broker``: an in-process :class:`~pydmq.testing.EmbeddedBroker` on a free loopback
  port with data in a temporary directory; use ``pydmq_broker.bootstrap``.
- ``pydmq_broker_process``: the same as a separate ``python -m pydmq serve`` process (for
  tests that kill or restart the broker).
- ``pydmq_bootstrap``: just the ``host:port`` string of ``pydmq_broker``.

Override broker properties with ``@pytest.mark.pydmq_config({"num.partitions": 3})``.

Like Kafka's own test harness, the fixtures set ``group.initial.rebalance.delay.ms`` to 0: a
consumer group's first rebalance does not wait the broker default of 3 s for more members.
Mark a test with ``pydmq_config({"group.initial.rebalance.delay.ms": 3000})`` to get
Kafka's default back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pydmq.testing.embedded import EmbeddedBroker
from pydmq.testing.process import BrokerProcess

__all__ = ["FIXTURE_DEFAULTS", "pydmq_bootstrap", "pydmq_broker", "pydmq_broker_process"]

# Broker properties the fixtures set before a test's own pydmq_config overrides.
FIXTURE_DEFAULTS: Mapping[str, object] = {"group.initial.rebalance.delay.ms": 0}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "pydmq_config(overrides): broker properties for the pydmq fixtures"
    )


def _overrides(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("pydmq_config")
    return {**FIXTURE_DEFAULTS, **(marker.args[0] if marker and marker.args else {})}


@pytest.fixture
def pydmq_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker(tmp_path / "pydmq-data", overrides=_overrides(request))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def pydmq_bootstrap(pydmq_broker: EmbeddedBroker) -> str:
    return pydmq_broker.bootstrap


@pytest.fixture
def pydmq_broker_process(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "pydmq-data", overrides=_overrides(request))
    process.start()
    try:
        yield process
    finally:
        process.stop()
