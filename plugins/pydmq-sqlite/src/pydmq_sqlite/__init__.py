"""A pydmq storage engine keeping batches in SQLite: one database per data directory."""

from pydmq_sqlite.engine import SqliteLog, SqliteStorageEngine

__all__ = ["SqliteLog", "SqliteStorageEngine"]
