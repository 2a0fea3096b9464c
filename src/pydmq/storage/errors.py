"""Storage failures: which write errors are transient and which take a log dir offline.

Kafka's rule is that any I/O error takes the log dir offline. pydmq keeps two exceptions,
both transient because a failed write is undone (the file is truncated back to its size
before the write) and nothing of it remains, so the next write may succeed:

* a full disk (ENOSPC, EDQUOT), once space returns;
* a process or system out of file descriptors (EMFILE, ENFILE) when a segment, index or
  checkpoint file is opened, once descriptors are freed: they are a resource the broker
  shares with its connections, not a property of the disk, and a client that opens many
  connections must not be able to take a log dir offline.

Everything else takes the log dir offline until a restart:

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

_TRANSIENT = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE})


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
    """A failed write that may succeed when retried later (the disk or quota was full, or
    the process or system had no file descriptor left)."""
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
