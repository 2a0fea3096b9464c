"""pydmq.config.log_levels (the BROKER_LOGGER resource: Kafka's level names, SET/DELETE with
Kafka's refusals, all-or-nothing per resource) and pydmq.config.log_format (JSON lines)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from pydmq.config.log_format import JsonFormatter
from pydmq.config.log_levels import (
    LoggerChange,
    alter_logger_levels,
    broker_loggers,
    kafka_level,
    kafka_level_name,
)
from pydmq.protocol.errors import ErrorCode, TopicError

NAME = "pydmq.test_log_levels.child"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    """A pydmq logger of our own, and the root level put back afterwards."""
    made = logging.getLogger(NAME)
    root = logging.getLogger()
    before = root.level
    yield made
    made.setLevel(logging.NOTSET)
    root.setLevel(before)


def _refusal(*changes: LoggerChange) -> tuple[int, str]:
    with pytest.raises(TopicError) as caught:
        alter_logger_levels(list(changes), validate_only=False)
    return caught.value.error_code, caught.value.message


def test_kafka_names_of_python_levels() -> None:
    assert [kafka_level_name(n) for n in (0, 5, 6, 10, 15, 20, 30, 40, 50, 51, 60, 99)] == [
        "TRACE", "TRACE", "DEBUG", "DEBUG", "INFO", "INFO", "WARN", "ERROR", "FATAL", "OFF",
        "OFF", "OFF",
    ]  # fmt: skip


def test_set_and_delete_change_the_level_and_inheritance(logger: logging.Logger) -> None:
    assert NAME in broker_loggers() and broker_loggers()[0] == "root"
    logging.getLogger().setLevel(logging.INFO)
    alter_logger_levels([LoggerChange(NAME, SET, "DEBUG")], validate_only=False)
    assert kafka_level(NAME) == "DEBUG" and logger.isEnabledFor(logging.DEBUG)
    alter_logger_levels([LoggerChange(NAME, SET, "OFF")], validate_only=False)
    assert not logger.isEnabledFor(logging.CRITICAL)
    alter_logger_levels([LoggerChange(NAME, DELETE, None)], validate_only=False)
    assert logger.level == logging.NOTSET and kafka_level(NAME) == "INFO"  # the root's
    alter_logger_levels([LoggerChange("root", SET, "TRACE")], validate_only=False)
    assert kafka_level(NAME) == "TRACE" and logger.isEnabledFor(5)


def test_validate_only_and_one_bad_entry_change_nothing(logger: logging.Logger) -> None:
    logger.setLevel(logging.INFO)
    alter_logger_levels([LoggerChange(NAME, SET, "ERROR")], validate_only=True)
    assert kafka_level(NAME) == "INFO"
    code, _ = _refusal(LoggerChange(NAME, SET, "ERROR"), LoggerChange(NAME, SET, "LOUD"))
    assert code == ErrorCode.INVALID_CONFIG and kafka_level(NAME) == "INFO"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (LoggerChange("pydmq.no.such.logger", SET, "INFO"), ErrorCode.INVALID_CONFIG),
        (LoggerChange("pydmq.no.such.logger", DELETE, None), ErrorCode.INVALID_CONFIG),
        (LoggerChange("asyncio", SET, "INFO"), ErrorCode.INVALID_CONFIG),  # not the broker's
        (LoggerChange(NAME, SET, "WARNING"), ErrorCode.INVALID_CONFIG),  # Python's name
        (LoggerChange(NAME, SET, "debug"), ErrorCode.INVALID_CONFIG),  # case matters, as Kafka
        (LoggerChange(NAME, SET, None), ErrorCode.INVALID_CONFIG),
        (LoggerChange("root", DELETE, None), ErrorCode.INVALID_REQUEST),
        (LoggerChange(NAME, APPEND, "INFO"), ErrorCode.INVALID_REQUEST),
        (LoggerChange(NAME, SUBTRACT, "INFO"), ErrorCode.INVALID_REQUEST),
        (LoggerChange(NAME, 9, "INFO"), ErrorCode.INVALID_REQUEST),
    ],
)
def test_refusals(logger: logging.Logger, change: LoggerChange, code: ErrorCode) -> None:
    assert _refusal(change)[0] == code


def test_json_lines_carry_kafka_level_names_and_the_traceback() -> None:
    formatter = JsonFormatter()
    record = logging.LogRecord(
        NAME, logging.WARNING, __file__, 1, "disk %s is %d%% full", ("a", 97), None
    )
    line = json.loads(formatter.format(record))
    assert line["level"] == "WARN" and line["logger"] == NAME
    assert line["message"] == "disk a is 97% full" and line["ts"].endswith("+00:00")
    try:
        raise OSError("boom")
    except OSError:
        failed = logging.LogRecord(NAME, logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = formatter.format(failed)
    assert "\n" not in text
    assert "OSError: boom" in json.loads(text)["exception"]
