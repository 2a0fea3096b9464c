"""Support for the differential tests (test_differential.py): a reference Apache Kafka broker
process started with compat/kafka/start.sh, and the comparison of two "observations".

An observation is plain JSON-able data (dicts, lists, str, int, bool, None) describing what a
client saw. :func:`flatten` turns one into ``{path: leaf}``; :func:`diff_paths` lists the paths
whose leaves differ between the two brokers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.testing.process import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_DIR = REPO_ROOT / "compat" / "kafka"
START_SH = KAFKA_DIR / "start.sh"

MISSING = "<missing>"


# -- the reference broker --------------------------------------------------------------------


def reference_kafka_unavailable() -> str | None:
    """Why the reference Kafka cannot be started here (None when it can)."""
    if shutil.which("java") is None:
        return "java is not on PATH (needed for the reference Apache Kafka)"
    if not list((KAFKA_DIR / "dist").glob("kafka_2.13-*.jar")) and shutil.which("mvn") is None:
        return "compat/kafka/dist has no Kafka jars and mvn is not on PATH to resolve them"
    if not START_SH.exists():
        return f"{START_SH} is missing"
    return None


def wait_until_serving(bootstrap: str, deadline: float, alive: Any = None) -> None:
    """Until ``deadline``: ApiVersions answered and Metadata lists at least one broker."""
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise RuntimeError(f"broker at {bootstrap} exited while starting")
        try:
            with RawClient(bootstrap, timeout=3) as client:
                versions = client.request(
                    18,
                    3,
                    ApiVersionsRequest(
                        client_software_name="pydmq-diff", client_software_version="1.0"
                    ),
                )
                if versions.body.error_code == 0:
                    md = client.request(
                        3, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False)
                    )
                    if md.body.brokers and md.body.controller_id >= 0:
                        return
        except (OSError, ConnectionError, TimeoutError) as exc:
            last = exc
        time.sleep(0.2)
    raise TimeoutError(f"{bootstrap} did not serve ApiVersions + Metadata in time ({last!r})")


class ReferenceKafka:
    """compat/kafka/start.sh as a child process (its PID is the JVM's: the script execs it).

    It runs in its own process group, so a stop while the script is still formatting the
    storage (a JVM child of the script) reaches that child too; nothing else is signalled.
    """

    def __init__(
        self,
        props: Mapping[str, object],
        root: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        """``extra_env``: more of start.sh's variables (KAFKA_EXTRA_PROPS_FILE, ...)."""
        self.props = dict(props)
        self.extra_env = dict(extra_env or {})
        self.root = Path(root or tempfile.mkdtemp(prefix="pydmq-refkafka-"))
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.log_path = self.root / "kafka.log"
        self.process: subprocess.Popen[bytes] | None = None
        # Properties appended last, one per line (values with spaces: JAAS lines); see
        # KAFKA_EXTRA_PROPS_FILE in compat/kafka/start.sh.
        self.props_lines: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ReferenceKafka:
        extra = " ".join(f"{k}={v}" for k, v in self.props.items())
        env = {**os.environ, "KAFKA_EXTRA_PROPS": extra, **self.extra_env}
        if self.props_lines:
            props_file = self.root / "extra.properties"
            self.root.mkdir(parents=True, exist_ok=True)
            props_file.write_text("".join(line + "\n" for line in self.props_lines))
            env["KAFKA_EXTRA_PROPS_FILE"] = str(props_file)
        env.setdefault("KAFKA_LOG_LEVEL", "warn")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    "bash",
                    str(START_SH),
                    str(self.port),
                    str(self.root / "data"),
                    str(self.controller_port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float) -> None:
        try:
            wait_until_serving(self.bootstrap, time.monotonic() + timeout, self.alive)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"reference Kafka did not start: {exc}\n{self.log_tail()}") from exc

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-size:].decode(errors="replace")
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            # The data is thrown away: no need for a controlled shutdown.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# -- observations ----------------------------------------------------------------------------


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": [1, 2]}}`` -> ``{"a.b[0]": 1, "a.b[1]": 2}`` (empty containers kept)."""
    if isinstance(obj, Mapping):
        if not obj:
            return {prefix: {}}
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, list | tuple):
        if not obj:
            return {prefix: []}
        out = {}
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: obj}


def diff_paths(a: Any, b: Any) -> dict[str, tuple[Any, Any]]:
    fa, fb = flatten(a), flatten(b)
    out: dict[str, tuple[Any, Any]] = {}
    for path in sorted(set(fa) | set(fb)):
        va, vb = fa.get(path, MISSING), fb.get(path, MISSING)
        if va != vb:
            out[path] = (va, vb)
    return out


def covers(entry: str, path: str) -> bool:
    """A DELIBERATE_DIFFERENCES entry covers its own path and everything below it."""
    return path == entry or path.startswith(entry + ".") or path.startswith(entry + "[")


def check_json_able(obs: Any, who: str) -> None:
    try:
        json.dumps(obs)
    except TypeError as exc:  # pragma: no cover - a scenario bug
        raise AssertionError(f"observation from {who} is not plain data: {exc}") from exc


def short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value) if not isinstance(value, str) or value == MISSING else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
