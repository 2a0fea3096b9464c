"""franz-go's own pkg/kgo tests against pydmq (the CI subset).

compat/franz-go/run.sh takes franz-go's module (with its ``_test.go`` files) from the Go module
proxy into ``$PYDMQ_WORK/franz-go`` (default /tmp/pydmq-compat; cached, as is the compiled test
binary, so only the first run pays the 1-3 min build), starts its own pydmq broker on a free
loopback port and runs the tests listed in compat/franz-go/tests.allow, each in its own
process of the test binary. This test asserts that every allow-listed test passes. The full
run against pydmq and Apache Kafka 4.4, and why each other test is left out:
compat/franz-go/README.md and FINDINGS.md.
"""

from __future__ import annotations

import os

import pytest

from .go_suite_support import run_allowed

pytestmark = pytest.mark.interop

# The allow-listed subset runs in about two minutes on 2 cores; run.sh bounds each test.
TIMEOUT = float(os.environ.get("PYDMQ_FRANZ_GO_TIMEOUT", "600"))
# First run on a new machine: module download plus `go test -c` (1-3 min on 2 cores).
BUILD_TIMEOUT = float(os.environ.get("PYDMQ_FRANZ_GO_BUILD_TIMEOUT", "900"))
# KGO_TEST_RECORDS for the ETL tests: enough for several rebalances mid-stream, short for CI.
RECORDS = "10000"


@pytest.mark.timeout(BUILD_TIMEOUT + TIMEOUT + 60)
def test_franz_go_allowed_subset() -> None:
    run_allowed("franz-go", ["--records", RECORDS], TIMEOUT, BUILD_TIMEOUT)
