"""The console's pages against a real ``pydmq serve`` over HTTP (urllib): every page answers
200 with its figures, names are escaped, an unknown topic or group is a 404 page, the
console is read-only and rate-limited like the monitoring endpoints."""

from __future__ import annotations

import re

import pytest
from console_http import GROUP, NODE, RECORDS, TOPIC, get, group_path

from pydmq.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

ESCAPED_GROUP = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _row(page: str, table: str) -> list[list[str]]:
    """The cells (tags stripped) of each body row of table ``table``."""
    body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert body is not None, f"no table {table}"
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body.group(1))
    ]


def test_cluster_page(console_broker: BrokerProcess) -> None:
    page = get(console_broker.http_port, "/")
    assert page.status == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "x-ratelimit-limit" in page.headers  # the monitoring class's limit
    assert page.headers["x-ratelimit-limit"] == "100000"
    brokers = _row(page.text, "brokers")
    assert [b[0] for b in brokers] == [NODE]
    assert brokers[0][2] == str(console_broker.port)
    quorum = _row(page.text, "quorum")
    assert quorum[0][:3] == [NODE, "voter", "leader"]
    assert "<script" not in page.text  # no JavaScript at all


def test_topics_pages(console_broker: BrokerProcess) -> None:
    port = console_broker.http_port
    listed = get(port, "/topics")
    assert listed.status == 200
    rows = _row(listed.text, "topics")
    assert [r[:3] for r in rows] == [[TOPIC, "2", "1"]]
    assert 'href="/topics/orders"' in listed.text
    assert "records/s" in rows[0][3]
    one = get(port, f"/topics/{TOPIC}")
    assert one.status == 200
    partitions = _row(one.text, "partitions")
    node = NODE
    assert [p[:4] for p in partitions] == [["0", node, node, node], ["1", node, node, node]]
    assert [p[4] for p in partitions] == [str(n) for n in RECORDS]  # log end offsets
    assert all(int(p[5]) > 0 for p in partitions)  # log sizes
    assert "cleanup.policy" in one.text


def test_groups_pages_escape_the_name(console_broker: BrokerProcess) -> None:
    port = console_broker.http_port
    listed = get(port, "/groups")
    assert listed.status == 200
    assert GROUP not in listed.text and ESCAPED_GROUP in listed.text
    assert _row(listed.text, "groups")[0][:2] == [ESCAPED_GROUP, "Empty"]
    assert 'href="/groups/%3Cscript%3Ealert%281%29%3C%2Fscript%3E"' in listed.text
    one = get(port, group_path())
    assert one.status == 200
    assert GROUP not in one.text and f"Group {ESCAPED_GROUP}" in one.text
    offsets = _row(one.text, "offsets")
    assert [o[:5] for o in offsets] == [
        [TOPIC, str(p), "0", str(n), str(n)] for p, n in enumerate(RECORDS)
    ]
    plot = re.search(r'<svg id="lag-plot".*?</svg>', one.text, re.S)
    assert plot is not None
    assert len(re.findall(r'<polyline class="series"', plot.group(0))) == 2
    assert f"{TOPIC}-0" in plot.group(0) and f"{TOPIC}-1" in plot.group(0)


def test_unknown_topic_and_group_are_404_pages(console_broker: BrokerProcess) -> None:
    port = console_broker.http_port
    topic = get(port, "/topics/no-such-topic")
    assert topic.status == 404
    assert topic.headers["content-type"].startswith("text/html")
    assert "NOT_FOUND" in topic.text and "no-such-topic" in topic.text
    # not a legal topic name (Kafka's rule): the Metadata error, the name shown escaped
    markup = get(port, "/topics/%3Cscript%3E")
    assert markup.status == 400 and "INVALID_TOPIC_NAME" in markup.text
    assert "&lt;script&gt;" in markup.text and "<script>" not in markup.text
    group = get(port, "/groups/nobody-here")
    assert group.status == 404 and "NOT_FOUND" in group.text


def test_console_is_read_only(console_broker: BrokerProcess) -> None:
    port = console_broker.http_port
    for path in ("/", "/topics", f"/topics/{TOPIC}", "/groups", group_path()):
        refused = get(port, path, method="POST")
        assert refused.status == 405, path
        assert refused.headers["allow"] == "GET, HEAD"
