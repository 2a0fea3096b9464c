"""What the benchmarks read about the machine and about processes: ``/proc`` CPU time and
RSS of a process tree, the CPU model and memory, and the git commit measured."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "cpu_seconds",
    "git_commit",
    "git_output",
    "machine_info",
    "meminfo_kib",
    "process_tree",
    "rss_bytes",
    "settle_writeback",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def machine_info() -> dict[str, object]:
    """The machine a result was measured on."""
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gib": round(meminfo_kib("MemTotal") / MIB, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "librdkafka": librdkafka_version(),
    }


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def meminfo_kib(key: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    return 0


def settle_writeback() -> dict[str, float]:
    """Write back the page cache's dirty data (``sync``) and say how much there was.

    A max-rate phase leaves gigabytes of dirty pages; written back during the next
    measurement, they take disk and (on a VM) CPU time from whatever runs then.
    """
    dirty_mb = (meminfo_kib("Dirty") + meminfo_kib("Writeback")) / 1024
    start = time.monotonic()
    os.sync()
    return {"settle_dirty_mb": dirty_mb, "settle_s": time.monotonic() - start}


def librdkafka_version() -> str:
    import confluent_kafka

    version: object = confluent_kafka.version()  # a string; a tuple in older releases
    client = version[0] if isinstance(version, tuple) else version
    return f"confluent-kafka {client}, librdkafka {confluent_kafka.libversion()[0]}"


def git_output(*args: str) -> str:
    """``git <args>``'s output in the repository, stripped; empty when git cannot run or
    takes over 10 s: a benchmark labels its results with it and must not fail for it."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip()


def git_commit(short: int | None = None) -> str:
    """``HEAD``'s hash (its first ``short`` hex digits when given), with ``+dirty`` when the
    work tree has changes."""
    abbrev = [f"--short={short}"] if short else []
    head = git_output("rev-parse", *abbrev, "HEAD") or "unknown"
    return f"{head}+dirty" if git_output("status", "--porcelain", "--untracked-files=no") else head


def process_tree(roots: Sequence[int]) -> list[int]:
    """``roots`` and every live descendant (a launcher script's JVM, worker processes)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                parents[int(entry.name)] = int(stat[1])
    tree = [pid for pid in roots if pid in parents]
    frontier = list(tree)
    while frontier:
        children = [pid for pid, ppid in parents.items() if ppid in frontier]
        tree += children
        frontier = children
    return tree


def read_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time of ``pids`` (utime and stime: fields 14 and 15)."""
    total = 0
    for pid in pids:
        stat = read_stat(pid)
        if stat is not None:
            total += int(stat[11]) + int(stat[12])
    return total / CLK_TCK


def rss_bytes(pids: Sequence[int], *, private: bool = False) -> int:
    """Resident set size of ``pids`` (``/proc/<pid>/statm``); with ``private``, without the
    file-backed pages (the page cache of mapped segment files, which the kernel reclaims)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/statm").read_text().split()
            pages = int(fields[1]) - (int(fields[2]) if private else 0)
            total += pages * PAGE_SIZE
    return total
