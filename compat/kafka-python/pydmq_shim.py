"""pytest plugin: run kafka-python's own integration tests against a pydmq broker.

Loaded by compat/kafka-python/run.sh (``-p pydmq_shim``) into a pytest session whose rootdir is
the unpacked kafka-python sdist (``build/kafka-python/kafka_python-<version>/``). kafka-python's
test files and conftest are used unchanged; this file is the whole adapter:

1. ``test`` package. The sdist ships ``test/`` without ``test/__init__.py`` and without
   ``test/service.py`` (the process-spawning helper of their fixtures), and CPython's own
   regression-test package is also called ``test``. We register ``test`` as a package whose
   path is the sdist's ``test/`` directory, and a stand-in ``test.service`` whose
   ``ExternalService`` describes an already running broker (``SpawnedService``, which would
   start ZooKeeper/Kafka from the Kafka jars, refuses).

2. Broker fixture. Every broker the suite asks for goes through ``KafkaFixture.instance``
   (their ``kafka_broker_factory`` fixture calls it; some tests call it directly). We replace
   it: a PLAINTEXT broker with auto topic creation and replication factor 1 (what the suite's
   default fixture starts) is answered with an *external* ``KafkaFixture`` describing the
   pydmq broker at ``$PYDMQ_BOOTSTRAP``; a SASL_PLAINTEXT one (PLAIN, SCRAM) with the pydmq
   broker at ``$PYDMQ_SASL_BOOTSTRAP`` (run.sh starts it with the suite's user alice); anything
   else (SSL, ...) raises with the reason, so those tests fail at setup, naming the feature
   pydmq lacks.
   Unlike the suite's own external mode (``KAFKA_URI``), which skips the SASL module as
   "Testing on external Kafka Broker", this keeps those tests visible as failures.

3. Results. One line per test id (worst phase wins: a teardown error fails a passed test),
   ``PASSED|FAILED|SKIPPED <secs>s <nodeid>  <reason>``, appended to ``$PYDMQ_RESULTS`` as
   each test finishes; the collected ids are in ``$PYDMQ_RESULTS.collected`` and the id of the
   test in progress in ``$PYDMQ_RESULTS.current``.

4. One client race fixed. kafka-python 3.0.12's ``ClusterMetadata`` loses a metadata update
   asked for while a Metadata request is in flight: ``KafkaConsumer(topic)`` subscribes (which
   sets ``_need_update``) while the bootstrap request, built with no topics, is outstanding,
   and that request's answer clears the flag. The consumer then never asks for its topic's
   metadata (the next refresh is ``metadata_max_age_ms``, 5 minutes, away) and reads nothing:
   ``test_kafka_consumer`` and ``test_kafka_consumer_max_bytes_simple`` failed so about 1 run
   in 5 on a loaded machine, whatever the broker. The patch asks for another update when the
   answered request's topic set is no longer the one wanted; nothing else of the client is
   changed. FINDINGS.md, "Client race".

Environment: PYDMQ_BOOTSTRAP=host:port (required), KAFKA_PYTHON_SUITE_DIR (the unpacked
sdist), KAFKA_VERSION (the broker version the suite gates tests on; run.sh: 4.0.0),
PYDMQ_RESULTS (optional results file).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

import pytest

_SUITE = os.environ.get("KAFKA_PYTHON_SUITE_DIR") or os.getcwd()
_TEST_DIR = os.path.join(_SUITE, "test")
if not os.path.isdir(os.path.join(_TEST_DIR, "integration")):
    raise RuntimeError(f"pydmq_shim: no kafka-python test/integration under {_SUITE}")

# The suite's Fixture class requires $KAFKA_ROOT (the Kafka distribution it would spawn) to
# be an existing directory even when it never starts Kafka; no jars are needed here.
os.environ.setdefault("KAFKA_ROOT", _TEST_DIR)
os.environ.setdefault("KAFKA_VERSION", "4.0.0")
# The client under test is the sdist's own `kafka` package (the code the tests were written
# for), not whatever kafka-python the virtualenv has; run.sh pins the version.
if _SUITE not in sys.path:
    sys.path.insert(0, _SUITE)


# ---------------------------------------------------------------- 1. the `test` package
def _register_test_package() -> None:
    existing = sys.modules.get("test")
    if existing is not None and list(getattr(existing, "__path__", [])) == [_TEST_DIR]:
        return
    for name in [m for m in sys.modules if m == "test" or m.startswith("test.")]:
        del sys.modules[name]  # CPython's regression-test package, if anything imported it
    spec = importlib.machinery.ModuleSpec("test", None, is_package=True)
    spec.submodule_search_locations = [_TEST_DIR]
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["test"] = pkg

    service = types.ModuleType(
        "test.service", "pydmq_shim stand-in for kafka-python's test/service.py"
    )

    class ExternalService:
        """A service that is already running elsewhere (here: the pydmq broker)."""

        def __init__(self, host: str, port: int) -> None:
            self.host = host
            self.port = port

        def open(self) -> None:
            pass

        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

        def close(self) -> None:
            pass

        def wait_for(self, pattern: str, timeout: float = 30) -> bool:
            return True

        def dump_logs(self) -> None:
            pass

    class SpawnedService:
        def __init__(self, args: Any = None, env: Any = None) -> None:
            raise RuntimeError(
                "pydmq_shim: this test wants to spawn its own ZooKeeper/Kafka process; "
                "only the pydmq broker at $PYDMQ_BOOTSTRAP is available"
            )

    ExternalService.__module__ = SpawnedService.__module__ = "test.service"
    service.ExternalService = ExternalService  # type: ignore[attr-defined]
    service.SpawnedService = SpawnedService  # type: ignore[attr-defined]
    sys.modules["test.service"] = service
    pkg.service = service  # type: ignore[attr-defined]


_register_test_package()


# ---------------------------------------------------------------- 2. the broker fixture
def _bootstrap() -> tuple[str, int]:
    value = os.environ.get("PYDMQ_BOOTSTRAP", "")
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RuntimeError(f"pydmq_shim: PYDMQ_BOOTSTRAP must be host:port, got {value!r}")
    return host, int(port)


def _patch_kafka_fixture() -> None:
    from test.integration import fixtures  # the suite's module, unchanged

    cls = fixtures.KafkaFixture
    if getattr(cls, "_pydmq_patched", False):
        return
    original = cls.__dict__["instance"].__func__

    def instance(
        kls: Any,
        broker_id: int,
        zookeeper: Any = None,
        zk_chroot: Any = None,
        host: str = "localhost",
        port: int | None = None,
        external: bool = False,
        transport: str = "PLAINTEXT",
        replicas: int = 1,
        partitions: int = 4,
        sasl_mechanism: str | None = None,
        auto_create_topic: bool = True,
        tmp_dir: Any = None,
    ) -> Any:
        if external:
            return original(
                kls,
                broker_id,
                zookeeper=zookeeper,
                zk_chroot=zk_chroot,
                host=host,
                port=port,
                external=True,
                transport=transport,
                replicas=replicas,
                partitions=partitions,
                sasl_mechanism=sasl_mechanism,
                auto_create_topic=auto_create_topic,
                tmp_dir=tmp_dir,
            )
        sasl_bootstrap = os.environ.get("PYDMQ_SASL_BOOTSTRAP", "")
        if (
            str(transport).upper() == "SASL_PLAINTEXT"
            and str(sasl_mechanism).upper() in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
            and sasl_bootstrap
            and auto_create_topic
            and replicas == 1
        ):
            sasl_host, _, sasl_port = sasl_bootstrap.rpartition(":")
            return original(
                kls,
                broker_id,
                host=sasl_host,
                port=int(sasl_port),
                external=True,
                transport="SASL_PLAINTEXT",
                replicas=1,
                partitions=partitions,
                sasl_mechanism=sasl_mechanism,
                auto_create_topic=True,
                tmp_dir=tmp_dir,
            )
        wanted = []
        if str(transport).upper() != "PLAINTEXT":
            what = str(transport).upper()
            if sasl_mechanism:
                what += f" (SASL mechanism {sasl_mechanism})"
            wanted.append(f"listener security protocol {what}")
        if not auto_create_topic:
            wanted.append("auto.create.topics.enable=false")
        if replicas != 1:
            wanted.append(f"replication factor {replicas}")
        if wanted:
            raise RuntimeError(
                "pydmq_shim: the test asks for a broker with "
                + "; ".join(wanted)
                + "; the shim provides only the pydmq broker at $PYDMQ_BOOTSTRAP "
                "(PLAINTEXT, auto topic creation, one node) and $PYDMQ_SASL_BOOTSTRAP (SASL_PLAINTEXT "
                "with PLAIN and SCRAM) - pydmq has no TLS listeners yet"
            )
        bs_host, bs_port = _bootstrap()
        return original(
            kls,
            broker_id,
            host=bs_host,
            port=bs_port,
            external=True,
            transport="PLAINTEXT",
            replicas=1,
            partitions=partitions,
            auto_create_topic=True,
            tmp_dir=tmp_dir,
        )

    cls.instance = classmethod(instance)
    cls._pydmq_patched = True


# ---------------------------------------------------------------- 4. client race
def _patch_lost_metadata_update() -> None:
    from kafka.cluster import ClusterMetadata  # the sdist's client, unchanged on disk

    if getattr(ClusterMetadata, "_pydmq_patched", False):
        return
    build_request = ClusterMetadata.metadata_request
    apply_answer = ClusterMetadata.update_metadata

    def wanted(self: Any) -> tuple[bool, frozenset[str]]:
        return bool(self.need_all_topic_metadata), frozenset(self._topics)

    def metadata_request(self: Any) -> Any:
        self._pydmq_requested = wanted(self)
        return build_request(self)

    def update_metadata(self: Any, metadata: Any) -> Any:
        changed_in_flight = getattr(self, "_pydmq_requested", None) not in (None, wanted(self))
        result = apply_answer(self, metadata)
        if changed_in_flight:
            self.request_update()  # the answer is for a topic set no longer wanted
        return result

    ClusterMetadata.metadata_request = metadata_request
    ClusterMetadata.update_metadata = update_metadata
    ClusterMetadata._pydmq_patched = True


def pytest_configure(config: pytest.Config) -> None:
    _register_test_package()  # again, in case a plugin imported CPython's `test` meanwhile
    _patch_kafka_fixture()
    _patch_lost_metadata_update()


# ---------------------------------------------------------------- 3. results
_RANK = {"PASSED": 0, "SKIPPED": 1, "FAILED": 2}
_results: dict[str, dict[str, Any]] = {}


def _reason(report: pytest.TestReport) -> str:
    if report.skipped:
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            return str(longrepr[2]).removeprefix("Skipped: ")
        return str(longrepr or "")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    first = " ".join(text.strip().splitlines()[:2]) if text else ""
    phase = "" if report.when == "call" else f"[{report.when}] "
    return (phase + first)[:300]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.passed and report.when != "call":
        status = None
    elif report.passed:
        status = "PASSED"
    elif report.skipped:
        status = "SKIPPED"
    else:
        status = "FAILED"
    entry = _results.setdefault(report.nodeid, {"status": None, "reason": "", "secs": 0.0})
    entry["secs"] += report.duration
    if status is None:
        return
    if entry["status"] is None or _RANK[status] > _RANK[entry["status"]]:
        entry["status"] = status
        entry["reason"] = "" if status == "PASSED" else _reason(report)


def _results_path() -> str | None:
    return os.environ.get("PYDMQ_RESULTS") or None


def pytest_collection_finish(session: pytest.Session) -> None:
    path = _results_path()
    if path:
        with open(path + ".collected", "w", encoding="utf-8") as out:
            out.writelines(item.nodeid + "\n" for item in session.items)


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    # If the whole session dies inside this test (a hard timeout, a crash), run.sh finds the
    # id here without a verdict and reports it as failed.
    path = _results_path()
    if path:
        with open(path + ".current", "w", encoding="utf-8") as out:
            out.write(nodeid + "\n")


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    # Written test by test, so the verdicts so far survive an aborted session.
    path = _results_path()
    entry = _results.get(nodeid)
    if not path or entry is None:
        return
    status = entry["status"] or "FAILED"
    line = f"{status:<7} {entry['secs']:6.1f}s {nodeid}"
    if entry["reason"]:
        line += "  " + entry["reason"].replace("\n", " ")
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path + ".current")
