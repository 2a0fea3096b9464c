"""Atomic small-file writes for checkpoints: write a temp file, fsync, rename, fsync the dir.

A reader sees either the old content or the new one, never a torn mix, even across a crash.
A write that fails (a full disk, an I/O error) removes its temp file and leaves the old file
as it was; a failed fsync is raised as :class:`~pydmq.storage.errors.SyncFailedError`.
"""

from __future__ import annotations

import contextlib
import os
import struct

from pydmq.failpoints import SHORT, failpoint, torn_write
from pydmq.storage.errors import fsync

__all__ = [
    "fsync_dir",
    "make_dirs_durably",
    "read_checkpoint_file",
    "read_offset_checkpoint",
    "write_atomically",
    "write_offset_checkpoint",
]

_TMP_SUFFIX = ".tmp"
_OFFSET = struct.Struct(">q")
_READ_CHUNK = 1 << 16


def fsync_dir(path: str) -> None:
    """fsync a directory so that a rename or unlink inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd, path, "checkpoint.fsync")
    finally:
        os.close(fd)


def make_dirs_durably(path: str) -> None:
    """Create ``path`` and its missing parents; fsync the parent of each directory created.

    Without the parent's fsync a power loss may drop a new directory with everything in it,
    however durably its files were written.
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        make_dirs_durably(parent)
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    fsync_dir(parent)


def write_atomically(
    path: str, data: bytes | bytearray | memoryview, *, durable: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically; with ``durable`` the result survives a crash."""
    tmp = path + _TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            if failpoint("checkpoint.write") is SHORT:
                torn_write(fd, view)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                fsync(fd, tmp, "checkpoint.fsync")
        finally:
            os.close(fd)
        failpoint("checkpoint.rename.before")
        failpoint("checkpoint.rename")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # the old file stays as it was
        raise
    failpoint("checkpoint.rename.after")
    if durable:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_checkpoint_file(path: str) -> bytes | None:
    """The content of ``path``, or None if it does not exist.

    ``os.open``/``os.read`` rather than ``open()``: a broker start reads a few of these small
    files per partition, and the buffered file object costs several times the two syscalls.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def write_offset_checkpoint(path: str, offset: int, *, durable: bool = True) -> None:
    """Write one int64 offset atomically."""
    write_atomically(path, _OFFSET.pack(offset), durable=durable)


def read_offset_checkpoint(path: str) -> int | None:
    """Read an offset written by :func:`write_offset_checkpoint`; None if absent or malformed."""
    data = read_checkpoint_file(path)
    if data is None or len(data) != _OFFSET.size:
        return None
    return int(_OFFSET.unpack(data)[0])
