"""Named fault points for storage fault-injection tests: crashes and I/O errors.

Armed through ``PYDMQ_FAILPOINTS`` (read once at import) or ``PYDMQ_FAILPOINTS_FILE`` (a file
holding the same syntax, read at import and again each time :func:`reload` runs: ``pydmq
serve`` calls it on SIGUSR2, so a test or the chaos harness can break a live node's disk)::

    PYDMQ_FAILPOINTS="segment.append.after_write=crash,segment.fsync=eio-after=3"

Actions, each optionally followed by ``-after=N`` (act from the Nth hit on, N >= 1) and, for
the error actions, ``-times=M`` (act M times, then pass again; default: every hit from then on):

* ``crash`` — the process dies at once with exit status 137 (``os._exit``: no ``finally``
  blocks, no buffered-file flush, no LMDB commit, no atexit), as a ``kill -9`` at that
  instruction would. ``crash-after=N`` dies on the Nth hit.
* ``enospc`` / ``eio`` / ``emfile`` — the call raises ``OSError(ENOSPC)`` / ``OSError(EIO)``
  / ``OSError(EMFILE)`` before the real operation happens.
* ``short`` — only at write points (:data:`WRITE_POINTS`): the write stores the first half of
  its bytes, then fails with ENOSPC (a disk filling up in the middle of a write).

When neither variable is set, :func:`failpoint` is a no-op function bound at import: a call
site costs one function call and nothing else. Call sites are one line, ``failpoint("name")``
(a write site checks the result for :data:`SHORT` and calls :func:`torn_write`), and every
name is listed in :data:`POINTS`.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CRASH_EXIT_CODE",
    "ENV_VAR",
    "FILE_ENV_VAR",
    "POINTS",
    "SHORT",
    "WRITE_POINTS",
    "Fault",
    "enabled",
    "failpoint",
    "make_failpoint",
    "parse_faults",
    "parse_spec",
    "reload",
    "torn_pwrite",
    "torn_write",
]

ENV_VAR: Final = "PYDMQ_FAILPOINTS"
FILE_ENV_VAR: Final = "PYDMQ_FAILPOINTS_FILE"
CRASH_EXIT_CODE: Final = 137

# Points where a write happens: they accept ``short`` (the site tears its write).
WRITE_POINTS: Final = frozenset(
    {
        "segment.append.write",  # LogSegment.append, the os.write of the batches
        "checkpoint.write",  # write_atomically, the write of the temp file
        "raft.append.write",  # FileRaftLog.append, the pwrite of the entries
    }
)

POINTS: Final = WRITE_POINTS | frozenset(
    {
        "segment.append.before_write",  # LogSegment.append, before os.write
        "segment.append.after_write",  # LogSegment.append, after os.write, before tracking
        "segment.fsync",  # LogSegment.fsync, the fdatasync of a segment file
        "segment.create",  # LogSegment._open_file creating a new file (first append after a roll)
        "index.put.before_commit",  # LogIndex.put, before the LMDB write transaction
        "index.put.after_commit",  # LogIndex.put, after the LMDB transaction committed
        "index.commit",  # LogIndex._write, inside the LMDB write transaction (a failed commit)
        "index.sync",  # LogIndex.sync, the fsync of the LMDB environment
        "segment.roll.before",  # SegmentLog._roll, before the new segment file exists
        "segment.roll.after",  # SegmentLog._roll, after the new segment and its index write
        "checkpoint.fsync",  # write_atomically, the fsync of the temp file
        "checkpoint.rename",  # write_atomically, the os.replace
        "checkpoint.rename.before",  # write_atomically, temp file fsynced, before os.replace
        "checkpoint.rename.after",  # write_atomically, after os.replace, before the dir fsync
        "retention.delete.segment",  # SegmentLog._delete_prefix, after each segment deletion
        "cleaner.cleaned.fsync",  # CleanedSegmentFile.finish, the fdatasync of a cleaned segment
        "cleaner.swap.before_rename",  # the .cleaned file is synced, before its rename to .swap
        "cleaner.swap.renamed",  # the .swap rename and its directory fsync are done
        "cleaner.swap.index_dropped",  # the replaced segments' LMDB entries are dropped, synced
        "cleaner.swap.delete.segment",  # SegmentLog.replace_segments, after each old unlink
        "cleaner.swap.after_rename",  # the .swap file renamed to .log, before the directory fsync
        "cleaner.swap.done",  # the new segment is scanned and indexed
        "raft.fsync",  # FileRaftLog.flush, the fsync of a segment file
        "quorum_state.write",  # FileQuorumStateStore.write, before the atomic write
    }
)

_ACTION = re.compile(r"^(crash|enospc|eio|emfile|short)(?:-after=(-?\d+))?(?:-times=(-?\d+))?$")
_ERRNO: Final = {
    "enospc": errno.ENOSPC,
    "eio": errno.EIO,
    "emfile": errno.EMFILE,
    "short": errno.ENOSPC,
}


@dataclass(frozen=True, slots=True)
class Fault:
    """What an armed point does: ``action`` from hit ``after`` on, ``times`` times (0: always)."""

    action: str
    after: int = 1
    times: int = 0


class _Short:
    """The value :func:`failpoint` returns at a write point armed with ``short``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SHORT"


SHORT: Final = _Short()


def parse_faults(spec: str, source: str = ENV_VAR) -> dict[str, Fault]:
    """Parse a failpoint spec into {point: :class:`Fault`}.

    Raises ValueError for an unknown point or action (a typo must not silently disable a test).
    """
    faults: dict[str, Fault] = {}
    for item in spec.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        name, sep, action = item.partition("=")
        name = name.strip()
        action = action.strip()
        if not sep or name not in POINTS:
            raise ValueError(f"{source}: unknown failpoint in {item!r}")
        m = _ACTION.match(action)
        if m is None:
            raise ValueError(f"{source}: unknown action in {item!r}")
        kind = m.group(1)
        after = int(m.group(2) or 1)
        times = int(m.group(3) or 0)
        if after < 1 or (m.group(3) is not None and times < 1):
            raise ValueError(f"{source}: hit counts must be >= 1 in {item!r}")
        if kind == "crash" and m.group(3) is not None:
            raise ValueError(f"{source}: a crash happens once, -times makes no sense: {item!r}")
        if kind == "short" and name not in WRITE_POINTS:
            raise ValueError(f"{source}: {name} is not a write point, it cannot write short")
        faults[name] = Fault(kind, after, times)
    return faults


def parse_spec(spec: str) -> dict[str, int]:
    """The crash points of a spec: {point: hit number that crashes} (errors are ignored)."""
    return {n: f.after for n, f in parse_faults(spec).items() if f.action == "crash"}


def _noop(name: str) -> object:
    return None


class _Table:
    """The armed faults and their hit counts; replaced as a whole by :func:`reload`."""

    __slots__ = ("faults", "hits")

    def __init__(self, faults: Mapping[str, Fault]) -> None:
        self.faults = dict(faults)
        self.hits: dict[str, int] = {}


def _act(name: str, table: _Table) -> object:
    fault = table.faults.get(name)
    if fault is None:
        return None
    hit = table.hits.get(name, 0) + 1
    table.hits[name] = hit
    if hit < fault.after or (fault.times and hit >= fault.after + fault.times):
        return None
    if fault.action == "crash":
        try:
            sys.stderr.write(f"pydmq failpoint {name}: crash\n")  # unbuffered enough: fd 2
            sys.stderr.flush()
        finally:
            os._exit(CRASH_EXIT_CODE)
    if fault.action == "short":
        return SHORT
    code = _ERRNO[fault.action]
    raise OSError(code, f"{os.strerror(code)} (failpoint {name})")


def make_failpoint(spec: str) -> Callable[[str], object]:
    """An active failpoint function armed with ``spec`` (tests bind it in place of the
    module's own, which is fixed at import)."""
    table = _Table(parse_faults(spec))
    return lambda name: _act(name, table)


def _read_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


_FILE: Final = os.environ.get(FILE_ENV_VAR, "")
_TABLE: Final = _Table(
    parse_faults(os.environ.get(ENV_VAR, ""))
    | (parse_faults(_read_file(_FILE), FILE_ENV_VAR) if _FILE else {})
)


def _active(name: str) -> object:
    return _act(name, _TABLE)


failpoint: Final[Callable[[str], object]] = _active if (_TABLE.faults or _FILE) else _noop


def reload() -> bool:
    """Re-read ``PYDMQ_FAILPOINTS_FILE`` (hit counts restart); False when it is not set.

    A spec that does not parse leaves the armed faults as they were and raises ValueError.
    """
    if not _FILE:
        return False
    faults = parse_faults(_read_file(_FILE), FILE_ENV_VAR)
    _TABLE.faults = faults
    _TABLE.hits = {}
    return True


def enabled() -> bool:
    """True when a fault is armed, or may be armed later through the file."""
    return failpoint is not _noop


def torn_write(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write the first half of ``data`` at the file position, then fail with ENOSPC."""
    view = memoryview(data)
    if len(view) > 1:
        os.write(fd, view[: len(view) // 2])
    raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (failpoint: short write)")


def torn_pwrite(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """Write the first half of ``data`` at ``offset``, then fail with ENOSPC."""
    view = memoryview(data)
    if len(view) > 1:
        os.pwrite(fd, view[: len(view) // 2], offset)
    raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (failpoint: short write)")
