"""Fixtures of the console tests: a real ``pydmq serve`` with a topic holding records and a
consumer group (named like markup) with committed offsets and lag."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from confluent_kafka import Producer
from console_http import GROUP, RECORDS, TOPIC, get, group_path, post_json, wait_http

from pydmq.testing.process import BrokerProcess


@pytest.fixture(scope="package")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose console samples every 200 ms, with TOPIC (RECORDS records) and GROUP
    (committed at offset 0 of both partitions: its lag is RECORDS), the lag plot holding
    samples of it."""
    root: Path = tmp_path_factory.mktemp("console")
    broker = BrokerProcess(
        root / "data",
        log_path=root / "broker.log",
        overrides={
            "pydmq.rest.admin.requests.per.minute": 100000,
            "pydmq.rest.monitoring.requests.per.minute": 100000,
            "pydmq.console.sample.interval.ms": 200,
        },
    )
    broker.start()
    try:
        wait_http(broker)
        port = broker.http_port
        assert post_json(port, "/v1/admin/topics", {"name": TOPIC, "partitions": 2}) == 201
        producer = Producer({"bootstrap.servers": broker.bootstrap})

        def produce(counts: tuple[int, ...]) -> None:
            for partition, count in enumerate(counts):
                for i in range(count):
                    producer.produce(TOPIC, b"record-%d" % i, partition=partition)
            assert producer.flush(30) == 0

        # half the records first, the rest once the plot has samples (so the plot, and the
        # screenshot of it, shows the lag rising)
        first = tuple(n // 2 for n in RECORDS)
        produce(first)
        reset = {"topic": TOPIC, "to": "earliest"}
        assert (
            post_json(port, f"/v1/admin/groups/{quote(GROUP, safe='')}/offsets/reset", reset) == 200
        )
        deadline = time.monotonic() + 20
        while 'class="series"' not in get(port, group_path()).text:
            assert time.monotonic() < deadline, "the lag plot never had a sample"
            time.sleep(0.2)
        time.sleep(1)  # a few samples at the first lag (only what the plot looks like)
        produce(tuple(n - f for n, f in zip(RECORDS, first, strict=True)))
        time.sleep(0.5)  # a few samples at the final lag (ditto)
        yield broker
    finally:
        broker.stop()
