"""Storage faults of a chaos run: a node's own small disk, its failpoint file, damaged files.

Each node's data dir is a tmpfs of its own (:class:`NodeDisk`, root only), so filling one
node's disk leaves the others alone; a ballast file fills it to the last byte and is deleted to
give the space back. :class:`NodeFailpoints` is the node's ``PYDMQ_FAILPOINTS_FILE``: arming
writes a spec into it and sends the node SIGUSR2, which re-reads it (see
:mod:`pydmq.failpoints`), so a live node's next segment write or fsync fails with EIO.
:func:`damage_segment` zeroes bytes in the middle of a stopped replica's segment file.

Used by the nemesis thread of :mod:`pydmq.chaos.faults`; nothing here runs inside a node.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pydmq.failpoints import FILE_ENV_VAR

__all__ = [
    "DAMAGE_BYTES",
    "Damage",
    "NodeDisk",
    "NodeFailpoints",
    "damage_segment",
    "storage_faults_unavailable",
]

DAMAGE_BYTES = 100
_CHUNKS = (1 << 20, 1 << 12, 1)


def storage_faults_unavailable() -> str | None:
    """Why this process cannot give nodes their own filesystems, or None if it can."""
    if os.geteuid() != 0:
        return "a tmpfs per node needs root (mount -t tmpfs)"
    return None


class NodeDisk:
    """One node's data dir mounted as a tmpfs of ``size_mb`` MiB; a ballast file fills it."""

    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        self.size_mb = size_mb
        self.ballast = path / "chaos-ballast"
        self.mounted = False

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        _run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.path)])
        self.mounted = True

    def unmount(self) -> None:
        """Unmount (lazily if a process still holds files in it, e.g. a node being killed)."""
        if not self.mounted:
            return
        try:
            _run(["umount", str(self.path)])
        except RuntimeError:
            _run(["umount", "-l", str(self.path)])
        self.mounted = False

    def free_bytes(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def fill(self) -> int:
        """Write the ballast until the filesystem refuses a single byte; returns its size."""
        written = 0
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for chunk in _CHUNKS:
                block = b"\0" * chunk
                while True:
                    try:
                        written += os.write(fd, block)
                    except OSError as exc:
                        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                            raise
                        break
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.ballast)


class NodeFailpoints:
    """A node's failpoint file: what is written here is armed at the node's next SIGUSR2."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def env(self) -> dict[str, str]:
        """The environment the node's process needs to read this file."""
        return {FILE_ENV_VAR: str(self.path)}

    def write(self, spec: str) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(spec, encoding="utf-8")
        os.replace(tmp, self.path)

    def arm(self, spec: str, pid: int) -> None:
        self.write(spec)
        os.kill(pid, signal.SIGUSR2)

    def clear(self) -> None:
        """Nothing armed for the node's next start (a node reads the file at start-up)."""
        self.write("")


@dataclass(frozen=True, slots=True)
class Damage:
    """Where :func:`damage_segment` zeroed bytes."""

    file: Path
    position: int
    length: int

    def __str__(self) -> str:
        return f"{self.length} zero bytes at {self.position} of {self.file.name}"


def damage_segment(data_dir: Path, topic: str, partition: int, rng: random.Random) -> Damage | None:
    """Zero :data:`DAMAGE_BYTES` bytes in the middle half of one of the partition's segment
    files (the node must be stopped); None when no segment is large enough to damage."""
    directory = data_dir / f"{topic}-{partition}"
    candidates = sorted(p for p in directory.glob("*.log") if p.stat().st_size >= 4 * DAMAGE_BYTES)
    if not candidates:
        return None
    target = rng.choice(candidates)
    size = target.stat().st_size
    position = rng.randrange(size // 4, 3 * size // 4 - DAMAGE_BYTES)
    with open(target, "r+b") as f:
        f.seek(position)
        f.write(b"\0" * DAMAGE_BYTES)
        f.flush()
        os.fsync(f.fileno())
    return Damage(target, position, DAMAGE_BYTES)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip() or done.returncode}")
