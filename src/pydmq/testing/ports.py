"""Free loopback ports for brokers that tests and benchmarks start.

A port the kernel picked for a bind to port 0, then closed, can be handed out again by the
very next bind to port 0 anywhere on the machine: a node's control-plane or HTTP listener
binding port 0 while a cluster starts once took another node's client port before that node
bound it (EADDRINUSE in a fresh-clone CI run). So ports are drawn at random *below* the
kernel's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), where binds to port 0
never land, checked free by a bind, and never handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

__all__ = ["free_port", "free_ports"]

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 20000  # below: well-known and registered services
_DEFAULT_EPHEMERAL_LOW = 32768  # Linux's default when the range cannot be read
_taken: set[int] = set()
_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_LOW


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_pick(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now, below the ephemeral range, not handed out before by
    this process. Falls back to the kernel's pick when the ephemeral range leaves no room
    below it."""
    high = _ephemeral_low()
    if high - _LOWEST < 1000:
        return _kernel_pick(host)
    with _lock:
        for _ in range(1000):
            port = random.randrange(_LOWEST, high)
            if port not in _taken and _bindable(host, port):
                _taken.add(port)
                return port
    raise RuntimeError(f"no free port in {_LOWEST}-{high - 1} on {host}")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports (see :func:`free_port`)."""
    return [free_port(host) for _ in range(count)]
