"""docs/METRICS.md lists every metric a node exports, and the Grafana dashboard queries only
metrics that exist (checked against a live scrape of an embedded node)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pydmq.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[3]
_NAME = re.compile(r"\bpydmq_[a-z_]+")
_SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def _family(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _exported(tmp_path: Path) -> set[str]:
    with EmbeddedBroker(tmp_path) as broker:
        url = f"http://127.0.0.1:{broker.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
    return {family.name for family in text_string_to_metric_families(text)}


def test_metrics_doc_and_dashboard_match_the_export(tmp_path: Path) -> None:
    exported = _exported(tmp_path)
    # Families a fresh single node exports with no sample yet still have their header, but
    # the voters' Raft metrics exist only in cluster mode: documented, not in this scrape.
    cluster_only = {"pydmq_raft_commit_latency_seconds", "pydmq_raft_follower_lag_records"}
    doc = (ROOT / "docs" / "METRICS.md").read_text()
    documented = {_family(n) for n in _NAME.findall(doc)}
    assert exported - documented == set(), "exported but not in docs/METRICS.md"
    assert documented - exported - cluster_only == set(), "documented but not exported"
    dashboard = json.loads((ROOT / "docs" / "grafana" / "pydmq.json").read_text())
    queried = {
        _family(name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in _NAME.findall(target["expr"])
    }
    assert queried - exported - cluster_only == set(), "the dashboard queries unknown metrics"
