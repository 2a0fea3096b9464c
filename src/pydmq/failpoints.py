"""Named crash points for storage fault-injection tests (test builds only).

Enabled only through the ``PYDMQ_FAILPOINTS`` environment variable, read once at import::

    PYDMQ_FAILPOINTS="segment.append.after_write=crash,segment.roll.before=crash-after=2"

Actions:

* ``crash`` — the first time the point is reached, the process dies at once with exit status
  137 (``os._exit``: no ``finally`` blocks, no buffered-file flush, no LMDB commit, no atexit),
  as a ``kill -9`` at that instruction would.
* ``crash-after=N`` — the same on the Nth time the point is reached (N >= 1).

When the variable is unset or empty, :func:`failpoint` is a no-op function bound at import:
a call site costs one function call and nothing else. Call sites are one line,
``failpoint("name")``, and every name is listed in :data:`POINTS`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Final

__all__ = ["CRASH_EXIT_CODE", "ENV_VAR", "POINTS", "enabled", "failpoint", "parse_spec"]

ENV_VAR: Final = "PYDMQ_FAILPOINTS"
CRASH_EXIT_CODE: Final = 137

POINTS: Final = frozenset(
    {
        "segment.append.before_write",  # LogSegment.append, before os.write
        "segment.append.after_write",  # LogSegment.append, after os.write, before tracking
        "index.put.before_commit",  # LogIndex.put, before the LMDB write transaction
        "index.put.after_commit",  # LogIndex.put, after the LMDB transaction committed
        "segment.roll.before",  # SegmentLog._roll, before the new segment file exists
        "segment.roll.after",  # SegmentLog._roll, after the new segment and its index write
        "checkpoint.rename.before",  # write_atomically, temp file fsynced, before os.replace
        "checkpoint.rename.after",  # write_atomically, after os.replace, before the dir fsync
        "retention.delete.segment",  # SegmentLog._delete_prefix, after each segment deletion
    }
)


def parse_spec(spec: str) -> dict[str, int]:
    """Parse a ``PYDMQ_FAILPOINTS`` value into {point: hit number that crashes}.

    Raises ValueError for an unknown point or action (a typo must not silently disable a test).
    """
    points: dict[str, int] = {}
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, action = item.partition("=")
        name = name.strip()
        action = action.strip()
        if not sep or name not in POINTS:
            raise ValueError(f"{ENV_VAR}: unknown failpoint in {item!r}")
        if action == "crash":
            points[name] = 1
        elif action.startswith("crash-after="):
            try:
                n = int(action.removeprefix("crash-after="))
            except ValueError:
                raise ValueError(f"{ENV_VAR}: bad hit count in {item!r}") from None
            if n < 1:
                raise ValueError(f"{ENV_VAR}: hit count must be >= 1 in {item!r}")
            points[name] = n
        else:
            raise ValueError(f"{ENV_VAR}: unknown action in {item!r}")
    return points


def _noop(name: str) -> None:
    return None


def _make_active(armed: Mapping[str, int]) -> Callable[[str], None]:
    remaining = dict(armed)

    def _failpoint(name: str) -> None:
        left = remaining.get(name)
        if left is None:
            return
        if left > 1:
            remaining[name] = left - 1
            return
        try:
            sys.stderr.write(f"pydmq failpoint {name}: crash\n")  # unbuffered enough: fd 2
            sys.stderr.flush()
        finally:
            os._exit(CRASH_EXIT_CODE)

    return _failpoint


_ARMED: Final = parse_spec(os.environ.get(ENV_VAR, ""))

failpoint: Final[Callable[[str], None]] = _make_active(_ARMED) if _ARMED else _noop


def enabled() -> bool:
    """True when at least one failpoint was armed at import."""
    return bool(_ARMED)
