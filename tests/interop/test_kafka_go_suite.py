"""segmentio/kafka-go's own tests against pydmq (the CI subset).

compat/kafka-go/run.sh takes kafka-go's module (with its ``_test.go`` files) from the Go module
proxy into ``$PYDMQ_WORK/kafka-go`` (default /tmp/pydmq-compat; cached, as is the compiled
test binary), then, in a private network namespace where its own pydmq broker can take the
localhost:9092 the suite hard-codes, runs the tests listed in compat/kafka-go/tests.allow, each
in its own process. This test asserts that every allow-listed test passes. The full run
against pydmq and Apache Kafka 4.4, and why each other test is left out:
compat/kafka-go/README.md and FINDINGS.md.
"""

from __future__ import annotations

import os

import pytest

from .go_suite_support import run_allowed

pytestmark = pytest.mark.interop

TIMEOUT = float(os.environ.get("PYDMQ_KAFKA_GO_TIMEOUT", "900"))
BUILD_TIMEOUT = float(os.environ.get("PYDMQ_KAFKA_GO_BUILD_TIMEOUT", "900"))
NO_NETNS = 5  # run.sh's exit status when no network namespace can be made


@pytest.mark.timeout(BUILD_TIMEOUT + TIMEOUT + 60)
def test_kafka_go_allowed_subset() -> None:
    run_allowed(
        "kafka-go",
        [],
        TIMEOUT,
        BUILD_TIMEOUT,
        unavailable={NO_NETNS: "no network namespace (unshare --net) on this machine"},
    )
