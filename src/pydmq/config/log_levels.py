"""The broker's loggers as Kafka's BROKER_LOGGER config resource (KIP-412, KIP-817).

A BROKER_LOGGER resource is one node's application loggers: ``root`` and every Python logger
named ``pydmq`` or ``pydmq.*`` that exists in the process. DescribeConfigs lists each with its
effective level; IncrementalAlterConfigs changes them at run time, on that node only and until
it restarts (Kafka keeps no record of them either):

- SET gives a logger a level, one of Kafka's names ``OFF``, ``FATAL``, ``ERROR``, ``WARN``,
  ``INFO``, ``DEBUG``, ``TRACE``; an unknown logger or level -> INVALID_CONFIG;
- DELETE takes a logger's own level away, so it inherits its parent's again (``root`` must
  keep one: INVALID_REQUEST); an unknown logger -> INVALID_CONFIG;
- APPEND and SUBTRACT (list operations) and unknown operations -> INVALID_REQUEST.

A resource's changes are all checked before any is made, so one bad entry changes nothing.
Python's levels map onto Kafka's names: TRACE is 5 (below DEBUG), FATAL is CRITICAL and OFF is
above every level a record can have.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pydmq.protocol.errors import ErrorCode, TopicError

__all__ = [
    "ROOT_LOGGER",
    "LoggerChange",
    "alter_logger_levels",
    "broker_loggers",
    "kafka_level",
    "kafka_level_name",
]

ROOT_LOGGER = "root"

TRACE = 5
OFF = logging.CRITICAL + 10

# Kafka's level names (LogLevelConfig), most severe first, and the Python level each sets
LEVELS: dict[str, int] = {
    "OFF": OFF,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}

_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class LoggerChange:
    """One IncrementalAlterConfigs entry of a BROKER_LOGGER resource."""

    name: str
    operation: int
    value: str | None


def broker_loggers() -> list[str]:
    """``root``, then the process's pydmq loggers by name."""
    return [
        ROOT_LOGGER,
        *sorted(
            name
            for name in logging.Logger.manager.loggerDict
            if name == "pydmq" or name.startswith("pydmq.")
        ),
    ]


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def kafka_level_name(level: int) -> str:
    """The Kafka name of Python level ``level``: the nearest Kafka level at or above it
    (NOTSET..5 is TRACE, 11..20 INFO, and so on)."""
    for kafka_name, python_level in reversed(LEVELS.items()):
        if level <= python_level:
            return kafka_name
    return "OFF"


def kafka_level(name: str) -> str:
    """The Kafka name of logger ``name``'s effective level."""
    return kafka_level_name(_logger(name).getEffectiveLevel())


def _exists(name: str) -> bool:
    return name == ROOT_LOGGER or (
        (name == "pydmq" or name.startswith("pydmq.")) and name in logging.Logger.manager.loggerDict
    )


def _check(change: LoggerChange) -> None:
    if change.operation in (_APPEND, _SUBTRACT):
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"{'APPEND' if change.operation == _APPEND else 'SUBTRACT'} is not an operation "
            "on logger levels (a BROKER_LOGGER resource takes SET and DELETE)",
        )
    if change.operation not in (_SET, _DELETE):
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"Unknown operation {change.operation} on the BROKER_LOGGER resource",
        )
    if not _exists(change.name):
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Logger {change.name} does not exist")
    if change.operation == _DELETE:
        if change.name == ROOT_LOGGER:
            raise TopicError(ErrorCode.INVALID_REQUEST, "The root logger's level cannot be removed")
    elif change.value not in LEVELS:
        raise TopicError(
            ErrorCode.INVALID_CONFIG,
            f"{change.value!r} is not a log level for logger {change.name}; the levels are "
            + ", ".join(LEVELS),
        )


def alter_logger_levels(changes: Sequence[LoggerChange], validate_only: bool) -> None:
    """Check every change, then (unless ``validate_only``) make them all; the first problem
    raises :class:`TopicError` with Kafka's error code and nothing is changed."""
    for change in changes:
        _check(change)
    if validate_only:
        return
    for change in changes:
        logger = _logger(change.name)
        if change.operation == _DELETE:
            logger.setLevel(logging.NOTSET)
        else:
            assert change.value is not None
            logger.setLevel(LEVELS[change.value])
