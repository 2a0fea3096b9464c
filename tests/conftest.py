"""A last-resort watchdog for every test: pytest-timeout's SIGALRM cannot reach a main thread
blocked inside a C call that never returns (librdkafka's ``send_offsets_to_transaction`` once
waited 57 minutes in a fresh-clone CI run, which then hit CI's own limit with no trace of where).
When a test outlives its pytest-timeout by :data:`GRACE` seconds, faulthandler's C watchdog
thread prints every thread's stack and ends the session with exit status 1: a red run that says
where it hung, instead of a wedged one."""

from __future__ import annotations

import faulthandler
import os
from collections.abc import Iterator

import pytest

GRACE = float(os.environ.get("PYDMQ_WATCHDOG_GRACE", "120"))
_stderr: list[int] = []  # a duplicate of the session's real stderr, which capture does not swap


def pytest_configure(config: pytest.Config) -> None:
    _stderr.append(os.dup(2))


def pytest_unconfigure(config: pytest.Config) -> None:
    while _stderr:
        os.close(_stderr.pop())


def _timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    if marker is not None and "timeout" in marker.kwargs:
        return float(marker.kwargs["timeout"])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    limit = _timeout(item)
    if limit > 0:
        # pytest-timeout's limit covers setup, call and teardown together (func_only false)
        faulthandler.dump_traceback_later(limit + GRACE, exit=True, file=_stderr[0])
    try:
        yield
    finally:
        if limit > 0:
            faulthandler.cancel_dump_traceback_later()
