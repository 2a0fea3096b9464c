"""No single request's decoding wedges the node (decode budgets, against a broker process).

One raw connection sends one hostile request (one small element repeated to fill the request
size limit: empty topic entries, null-records partitions, empty names, tagged fields) while a
second client sends ApiVersions in a loop. Each case prints the second client's round trips
(p50/p99/max) and the broker's peak RSS during the case (VmHWM, reset per case through
/proc/<pid>/clear_refs when we may write it), and asserts only what cannot flake: every
ApiVersions is answered, none waited more than a wedge bound, the broker's RSS grew by less
than a generous bound (four times the request plus 256 MiB), the hostile connection got
INVALID_REQUEST or was closed, and the broker still serves.

Cases "at budget" send the largest request the budget admits (the same element repeated
up to the API's budget): the stall they cause is the decode, handler and encode time that the
budget allows, and they must be answered.

``socket.request.max.bytes`` is 16 MiB here (speed); ``PYDMQ_DECODE_TEST_MAX_BYTES`` sets
another size (104857600 for Kafka's default of 100 MiB).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.fetch import FetchRequest
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.testing.process import BrokerProcess
from support.broker_checks import assert_serves
from support.hostile_requests import (
    SHAPES,
    HostileShape,
    header_tag_flood_frame,
    tag_flood_body,
)
from support.raw_client import RawClient, decode_response_frame, encode_raw_frame

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

MAX_REQUEST = int(os.environ.get("PYDMQ_DECODE_TEST_MAX_BYTES", str(16 * 1024 * 1024)))
WEDGE_BOUND_S = 5.0
RSS_SLACK_MIB = 256  # generous: only a wedged loop misses it on a loaded 2-core machine
ANSWER_TIMEOUT_S = 120.0
API_VERSIONS = ApiVersionsRequest(client_software_name="probe", client_software_version="1.0")
_SIZE = struct.Struct(">i")
_HEADER_OVERHEAD = 64  # request header and the request's own fields around the repeated part


def decode_budget(api_key: int) -> int:
    # Imported when used, so that on a tree without budgets the cases fail on what they
    # check (a wedged loop, an RSS blow-up), not on an import.
    from pydmq.protocol.budgets import decode_budget as budget_of

    return budget_of(api_key)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-budget-"))
    proc = BrokerProcess(
        root / "data",
        overrides={"num.partitions": 1, "socket.request.max.bytes": MAX_REQUEST},
        log_path=root / "broker.log",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def served(broker: BrokerProcess) -> set[int]:
    """The API keys this broker answers (a single node closes on the controller's keys 4-7)."""
    with RawClient(broker.bootstrap) as client:
        return {api.api_key for api in client.request(18, 3, API_VERSIONS).body.api_keys}


class _Prober(threading.Thread):
    """Sends ApiVersions on its own connection in a loop and records each round trip."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.client = RawClient(bootstrap, timeout=ANSWER_TIMEOUT_S)
        self.latencies: list[float] = []
        self.errors: list[BaseException] = []
        self._finished = threading.Event()

    def run(self) -> None:
        try:
            while not self._finished.is_set():
                started = time.perf_counter()
                assert self.client.request(18, 3, API_VERSIONS).body.error_code == 0
                self.latencies.append(time.perf_counter() - started)
        except BaseException as exc:  # reported by the test thread
            self.errors.append(exc)

    def finish(self) -> list[float]:
        self._finished.set()
        self.join(ANSWER_TIMEOUT_S)
        self.client.close()
        assert not self.is_alive(), "the ApiVersions prober is stuck"
        assert not self.errors, f"ApiVersions failed during the hostile request: {self.errors}"
        return self.latencies


def _reset_peak_rss(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for pid {pid}")


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    flexible = API_SCHEMAS[api_key].is_flexible(version)
    return encode_raw_frame(api_key, version, 9, body, "hostile", flexible_header=flexible)


def _send_and_wait(broker: BrokerProcess, frame: bytes) -> bytes | None:
    """Send ``frame`` on a fresh connection; the response frame, or None if it was closed."""
    with RawClient(broker.bootstrap, timeout=ANSWER_TIMEOUT_S) as hostile:
        try:
            hostile.send(frame)
        except (BrokenPipeError, ConnectionResetError):
            return None  # closed while we were still sending
        with contextlib.suppress(ConnectionResetError):
            return hostile.read_frame()
        return None


def _run_case(
    broker: BrokerProcess, label: str, frame: bytes
) -> tuple[bytes | None, list[float], float]:
    assert len(frame) - 4 <= MAX_REQUEST, (label, len(frame))
    rss_before = _status_mib(broker.pid, "VmRSS")
    rss_reset = _reset_peak_rss(broker.pid)
    prober = _Prober(broker.bootstrap)
    prober.start()
    time.sleep(0.05)  # a few dozen round trips before, as a baseline
    started = time.perf_counter()
    answer = _send_and_wait(broker, frame)
    elapsed = time.perf_counter() - started
    time.sleep(0.05)
    latencies = prober.finish()
    peak = _status_mib(broker.pid, "VmHWM")
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"\n[{label}] {len(frame) / 2**20:.1f} MiB request: "
        f"{'answered' if answer is not None else 'closed'} in {elapsed * 1000:.0f} ms; "
        f"others' ApiVersions n={len(latencies)} p50 {statistics.median(latencies) * 1000:.1f} ms "
        f"p99 {p99 * 1000:.1f} ms max {ordered[-1] * 1000:.1f} ms; broker peak RSS "
        f"{peak:.0f} MiB (+{peak - rss_before:.0f})"
        f"{'' if rss_reset else ' (lifetime peak: clear_refs not writable)'}"
    )
    assert latencies, "no ApiVersions round trip completed"
    assert ordered[-1] < WEDGE_BOUND_S, f"{label}: another client waited {ordered[-1]:.1f} s"
    if rss_reset:
        # A few times the request (its receive buffer grows by doubling) plus what a budget
        # of decoded elements and their answers can hold; generous, against noise only.
        bound = 4 * len(frame) / 2**20 + RSS_SLACK_MIB
        assert peak - rss_before < bound, f"{label}: RSS grew {peak - rss_before:.0f} MiB"
    assert broker.process is not None and broker.process.poll() is None, broker.log_tail()
    assert_serves(broker.bootstrap)
    return answer, latencies, peak


def _expect_refused(shape_key: int, version: int, answer: bytes | None) -> None:
    """Closed, or answered with INVALID_REQUEST where the response has a top-level error."""
    if answer is None:
        return
    response = decode_response_frame(answer, shape_key, version)
    assert response.body.error_code == ErrorCode.INVALID_REQUEST, response.body


def _ids(shape: HostileShape) -> str:
    return f"{shape.name}-v{shape.version}"


@pytest.mark.parametrize("shape", SHAPES, ids=_ids)
def test_request_filling_the_size_limit_is_refused_without_wedging(
    broker: BrokerProcess, served: set[int], shape: HostileShape
) -> None:
    n = (MAX_REQUEST - _HEADER_OVERHEAD) // shape.element_size
    frame = _frame(shape.api_key, shape.version, shape.body(n))
    answer, _, _ = _run_case(broker, f"{_ids(shape)} x{n:,}", frame)
    if shape.api_key not in served:
        # The controller's keys on a client listener: closed as an unknown key, at once.
        assert answer is None, f"{_ids(shape)}: an unserved key must close the connection"
        return
    _expect_refused(shape.api_key, shape.version, answer)


# The controller's keys 4-7 are never served on a client listener (closed at once: the case
# above); the rest are served within their budgets.
CLIENT_SHAPES = [shape for shape in SHAPES if shape.api_key not in (4, 5, 6, 7)]


@pytest.mark.parametrize("shape", CLIENT_SHAPES, ids=_ids)
def test_largest_request_within_the_budget_is_served_without_wedging(
    broker: BrokerProcess, served: set[int], shape: HostileShape
) -> None:
    assert shape.api_key in served
    # Every other array and tagged-field count of these requests is 0 or 1: leave room for 2.
    n = min(
        decode_budget(shape.api_key) - 2, (MAX_REQUEST - _HEADER_OVERHEAD) // shape.element_size
    )
    frame = _frame(shape.api_key, shape.version, shape.body(n))
    answer, _, _ = _run_case(broker, f"{_ids(shape)} x{n:,} (at budget)", frame)
    assert answer is not None, f"{_ids(shape)}: a request within its budget was not answered"


def test_tagged_field_flood_in_the_request_header_closes(broker: BrokerProcess) -> None:
    body = tag_flood_body(3, 9, MetadataRequest(topics=None), 0)
    n = (MAX_REQUEST - _HEADER_OVERHEAD) // 3  # tag 1000 (2 varint bytes) and its size
    frame = header_tag_flood_frame(3, 9, body, n)
    answer, _, _ = _run_case(broker, f"header tagged fields x{n:,}", frame)
    assert answer is None, "a header with a flood of tagged fields must close the connection"


@pytest.mark.parametrize(
    ("api_key", "version", "request_"),
    [
        (3, 9, MetadataRequest(topics=None)),
        (1, 12, FetchRequest(replica_id=-1, max_wait=0, topics=[])),
    ],
    ids=["metadata-v9", "fetch-v12"],
)
def test_tagged_field_flood_in_the_body_is_refused(
    broker: BrokerProcess, api_key: int, version: int, request_: object
) -> None:
    n = (MAX_REQUEST - _HEADER_OVERHEAD) // 3  # tag 1000 (2 varint bytes) and its size
    frame = _frame(api_key, version, tag_flood_body(api_key, version, request_, n))
    answer, _, _ = _run_case(broker, f"{API_SCHEMAS[api_key].name} v{version} tags x{n:,}", frame)
    _expect_refused(api_key, version, answer)
