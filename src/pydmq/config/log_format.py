"""How ``pydmq serve`` writes its log: Kafka-style text lines (the default) or one JSON object
per line (``--log-format json``), for log shippers that parse fields rather than text.

A JSON line holds ``ts`` (UTC, ISO 8601 with milliseconds), ``level`` (Kafka's level names:
WARN, not WARNING; :mod:`pydmq.config.log_levels`), ``logger``, ``thread``, ``message`` and,
when the record carries an exception, ``exception`` (the formatted traceback).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from pydmq.config.log_levels import LEVELS, kafka_level_name

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": kafka_level_name(record.levelno),
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str, log_format: str) -> None:
    """The root logger at ``level`` (a Python or Kafka level name; unknown -> INFO), writing
    ``log_format`` (one of :data:`LOG_FORMATS`) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    name = level.upper()
    python_names = {"WARNING": logging.WARNING, "CRITICAL": logging.CRITICAL}
    logging.basicConfig(
        level=LEVELS.get(name, python_names.get(name, logging.INFO)), handlers=[handler]
    )
