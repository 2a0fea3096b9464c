"""The answer to a read that met damaged stored data, in one function a broker can hook.

The replica manager's reads (Fetch) and the ListOffsets handler call :func:`corrupt_read_error`
when the storage engine raises :class:`~pydmq.storage.api.StorageCorruptionError` (or a stored
batch fails to decode). The answer is CORRUPT_MESSAGE, as Kafka's broker answers a
CorruptRecordException: librdkafka hands it to the application as a consumer error event (its
fetch error handler's default case) and the Java consumer throws a KafkaException from
``poll()``, whereas KAFKA_STORAGE_ERROR makes both refresh metadata and retry silently, which
on a single node is a stall nobody sees. The engine logged the damage (file, byte position,
offsets) at ERROR once when it found it; this is where a broker would also act on it (for
example take the log directory offline, which moves leadership in a cluster). Called on the
event loop, once per partition read that failed.
"""

from __future__ import annotations

import logging

from pydmq.protocol.errors import ErrorCode
from pydmq.storage.api import TopicPartition

__all__ = ["corrupt_read_error"]

log = logging.getLogger(__name__)


def corrupt_read_error(tp: TopicPartition, exc: Exception) -> int:
    """The partition error code for a read of ``tp`` that met damaged data (``exc``)."""
    log.debug("%s: read failed on corrupt data: %s", tp, exc)
    return ErrorCode.CORRUPT_MESSAGE
