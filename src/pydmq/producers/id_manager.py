"""ProducerIdManager: hands out producer ids that are never reused, even after a crash.

Ids come in blocks; the end of the current block is made durable before any id of it is
given out, so a restart continues after the block (Kafka's ProducerIdsRecord does the same
through the metadata log). If the block cannot be written (a full disk, an I/O error), no id
of it is given out: :class:`ProducerIdBlockError` (answered COORDINATOR_NOT_AVAILABLE, which
clients retry) and the next request tries again.
"""

from __future__ import annotations

import struct
from pathlib import Path

from pydmq.protocol.errors import ErrorCode
from pydmq.storage.checkpoint import write_atomically

__all__ = ["ProducerIdBlockError", "ProducerIdManager"]


class ProducerIdBlockError(Exception):
    """No producer id now: the next block could not be made durable (a single node) or
    obtained from the controller (a cluster, the subclass ProducerIdsUnavailableError)."""

    error_code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE


_BLOCK_SIZE = 1000
_RECORD = struct.Struct(">q")


class ProducerIdManager:
    """Owned by the event loop."""

    def __init__(self, path: Path, block_size: int = _BLOCK_SIZE) -> None:
        self._path = path
        self._block_size = block_size
        self._next = 0
        self._block_end = 0
        if path.exists():
            data = path.read_bytes()
            if len(data) == _RECORD.size:
                self._next = self._block_end = _RECORD.unpack(data)[0]

    def generate_producer_id(self) -> int:
        if self._next >= self._block_end:
            block_end = self._next + self._block_size
            try:
                write_atomically(str(self._path), _RECORD.pack(block_end))
            except OSError as exc:
                raise ProducerIdBlockError(f"producer id block not written: {exc}") from exc
            self._block_end = block_end
        producer_id = self._next
        self._next += 1
        return producer_id
