"""Zero-copy response assembly: records fields that stay as a list of buffers.

A handler puts a :class:`RecordsView` (for example mmap'd segment slices) where a generated
message expects records; :class:`ScatterWriter` writes the length prefix and splices the
buffers into its output list instead of copying them, so the connection can hand them to
``writelines``/``sendmsg``. Hand-written hot path (DESIGN.md §1, Fetch).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from pydmq.protocol.primitives import Buffer, Writer

__all__ = ["RecordsView", "ScatterWriter"]

_I32 = struct.Struct(">i")


class RecordsView:
    """Several buffers that together are one records field; ``len()`` is their total size."""

    __slots__ = ("buffers", "size")

    def __init__(self, buffers: Sequence[Buffer], size: int) -> None:
        self.buffers = buffers
        self.size = size

    def __len__(self) -> int:
        return self.size

    def tobytes(self) -> bytes:
        return b"".join(bytes(b) for b in self.buffers)


class ScatterWriter(Writer):
    """A Writer whose output is a list of buffers; RecordsView contents are never copied."""

    __slots__ = ("parts",)

    def __init__(self, buf: bytearray | None = None) -> None:
        super().__init__(buf)
        self.parts: list[Buffer] = []

    def _splice(self, view: RecordsView) -> None:
        self.parts.append(self.buf)
        self.parts.extend(view.buffers)
        self.buf = bytearray()

    def records(self, v: Buffer | None) -> None:
        if isinstance(v, RecordsView):
            self.buf += _I32.pack(v.size)
            self._splice(v)
        else:
            super().records(v)

    def compact_records(self, v: Buffer | None) -> None:
        if isinstance(v, RecordsView):
            self.uvarint(v.size + 1)
            self._splice(v)
        else:
            super().compact_records(v)

    def output(self) -> tuple[list[Buffer], int]:
        """All buffers in order and their total size."""
        parts = [*self.parts, self.buf] if self.buf else list(self.parts)
        return parts, sum(len(p) for p in parts)
