"""Request and response frames as a client sees them: the size prefix, whole request frames,
and the size a response announces. Sans-IO: bytes in, bytes out.

Every client of pydmq's own (the CLI's :mod:`pydmq.client.connection`, the inter-node
:mod:`pydmq.net.client`, the tests' raw client) builds its requests and reads its responses
through this module and the header functions of :mod:`pydmq.protocol.headers`.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from pydmq.protocol.errors import MalformedFrameError
from pydmq.protocol.headers import encode_request_header
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Writer

__all__ = [
    "SIZE",
    "encode_request_frame",
    "finish_frame",
    "response_size",
    "start_frame",
]

# The int32 before every frame: the number of bytes after it.
SIZE: Final = struct.Struct(">i")
_CORRELATION_ID_SIZE: Final = 4  # the smallest response: a v0 header, no body


def start_frame() -> Writer:
    """A writer holding a size prefix to be filled by :func:`finish_frame`."""
    w = Writer()
    w.int32(0)
    return w


def finish_frame(w: Writer) -> bytearray:
    """Write the size of what follows the prefix of a :func:`start_frame` writer; its buffer."""
    SIZE.pack_into(w.buf, 0, len(w.buf) - SIZE.size)
    return w.buf


def encode_request_frame(
    api_key: int,
    api_version: int,
    request: Any,
    correlation_id: int,
    client_id: str | None,
    *,
    header_version: int | None = None,
) -> bytearray:
    """Size prefix + request header (the version the pair requires, unless ``header_version``
    says otherwise) + ``request`` encoded at ``api_version``."""
    w = start_frame()
    encode_request_header(
        w, api_key, api_version, correlation_id, client_id, header_version=header_version
    )
    API_SCHEMAS[api_key].encode_request(w, request, api_version)
    return finish_frame(w)


def response_size(prefix: bytes | bytearray | memoryview, max_size: int) -> int:
    """The size a response's 4-byte prefix announces; MalformedFrameError when it cannot be a
    response (smaller than a correlation id, or larger than ``max_size``)."""
    (size,) = SIZE.unpack(prefix)
    if size < _CORRELATION_ID_SIZE or size > max_size:
        raise MalformedFrameError(f"invalid response size {size}")
    return int(size)
