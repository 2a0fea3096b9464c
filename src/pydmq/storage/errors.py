"""Storage failures: which write errors are transient and which take a log dir offline.

Kafka's rule is that any I/O error takes the log dir offline. pydmq keeps one exception:
a full disk (ENOSPC, EDQUOT) is transient, because a failed write is undone (the file is
truncated back to its size before the write) and nothing of it remains: the next write may
succeed once space returns. Everything else takes the log dir offline until a restart:

* any failed ``fsync``/``fdatasync`` (:class:`SyncFailedError`): Linux may have dropped the
  dirty pages it covered and cleared the error, so a later fsync that succeeds proves nothing;
* EIO and other device errors on a write;
* a failed write whose undo (the truncation back) failed too.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from pydmq.failpoints import failpoint

__all__ = ["KafkaStorageError", "SyncFailedError", "fdatasync", "fsync", "is_transient"]

_TRANSIENT = frozenset({errno.ENOSPC, errno.EDQUOT})


class KafkaStorageError(Exception):
    """A write, fsync or checkpoint of a log failed (Kafka's KafkaStorageException).

    Answered as KAFKA_STORAGE_ERROR (56), which clients retry. Nothing of the failed write is
    left in the log. ``offline`` says the failure took the data directory ``log_dir`` offline:
    no write to it will succeed until the broker restarts. Otherwise the next write may.
    """

    def __init__(self, message: str, log_dir: str, *, offline: bool) -> None:
        super().__init__(message)
        self.message = message
        self.log_dir = log_dir
        self.offline = offline


class SyncFailedError(OSError):
    """An ``fsync``/``fdatasync`` failed: what it should have made durable may be lost."""


def is_transient(exc: BaseException) -> bool:
    """A failed write that may succeed when retried later (the disk or quota was full)."""
    return (
        isinstance(exc, OSError)
        and not isinstance(exc, SyncFailedError)
        and exc.errno in _TRANSIENT
    )


def fsync(fd: int, path: str, point: str) -> None:
    """``os.fsync`` (failpoint ``point`` first); a failure is a :class:`SyncFailedError`."""
    _sync(os.fsync, fd, path, point)


def fdatasync(fd: int, path: str, point: str) -> None:
    """``os.fdatasync`` (failpoint ``point`` first); a failure is a :class:`SyncFailedError`."""
    _sync(os.fdatasync, fd, path, point)


def _sync(call: Callable[[int], None], fd: int, path: str, point: str) -> None:
    try:
        failpoint(point)
        call(fd)
    except OSError as exc:
        raise SyncFailedError(exc.errno, exc.strerror, path) from exc
