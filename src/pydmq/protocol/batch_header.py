"""The RecordBatch v2 header layout, declared once: field offsets, struct formats, the CRC range
and the attribute bits.

Every module that reads or patches batch headers by position (``protocol/records.py``, the
segment engine, the Produce handler, the engine conformance suite) takes its offsets and
structs from here. Layout of a v2 batch (all big-endian; offsets from the batch's first byte)::

     0 baseOffset int64         8 batchLength int32      12 partitionLeaderEpoch int32
    16 magic int8              17 crc uint32             21 attributes int16
    23 lastOffsetDelta int32   27 baseTimestamp int64    35 maxTimestamp int64
    43 producerId int64        51 producerEpoch int16    53 baseSequence int32
    57 recordsCount int32      61 records

``batchLength`` counts the bytes after itself, so a batch takes ``batchLength + LOG_OVERHEAD``
bytes. The CRC32C covers everything from ``attributes`` to the end of the batch: ``baseOffset``
and ``partitionLeaderEpoch`` can be patched in place without recomputing it.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = [
    "ATTRIBUTES",
    "ATTRIBUTES_AT",
    "BASE_OFFSET",
    "BASE_OFFSET_AT",
    "BASE_SEQUENCE_AT",
    "BASE_TIMESTAMP_AT",
    "BATCH_HEADER_SIZE",
    "BATCH_LENGTH_AT",
    "COMPRESSION_MASK",
    "CONTROL_FLAG",
    "CRC",
    "CRC_AT",
    "CRC_START",
    "DELETE_HORIZON_FLAG",
    "FRAME",
    "HEADER",
    "LAST_OFFSET_DELTA",
    "LAST_OFFSET_DELTA_AT",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_AT",
    "MAX_TIMESTAMP",
    "MAX_TIMESTAMP_AT",
    "PARTITION_LEADER_EPOCH",
    "PARTITION_LEADER_EPOCH_AT",
    "PRODUCER",
    "PRODUCER_EPOCH_AT",
    "PRODUCER_ID_AT",
    "RECORDS_COUNT_AT",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG",
]

# -- field offsets ---------------------------------------------------------------------------------

BASE_OFFSET_AT: Final = 0
BATCH_LENGTH_AT: Final = 8
PARTITION_LEADER_EPOCH_AT: Final = 12
MAGIC_AT: Final = 16
CRC_AT: Final = 17
ATTRIBUTES_AT: Final = 21
LAST_OFFSET_DELTA_AT: Final = 23
BASE_TIMESTAMP_AT: Final = 27
MAX_TIMESTAMP_AT: Final = 35
PRODUCER_ID_AT: Final = 43
PRODUCER_EPOCH_AT: Final = 51
BASE_SEQUENCE_AT: Final = 53
RECORDS_COUNT_AT: Final = 57
BATCH_HEADER_SIZE: Final = 61  # where the records start

LOG_OVERHEAD: Final = PARTITION_LEADER_EPOCH_AT  # baseOffset + batchLength: not counted by it
CRC_START: Final = ATTRIBUTES_AT  # the CRC covers [CRC_START, end of batch)
MAGIC: Final = 2  # the only batch format this broker reads or writes

# -- structs (hand-written hot paths: one unpack per header, DESIGN.md section 3) ---------------------

# The whole header, field by field in the order above.
HEADER: Final = struct.Struct(">qiibIhiqqqhii")
# baseOffset and batchLength: enough to walk a buffer of batches.
FRAME: Final = struct.Struct(">qi")
# producerId, producerEpoch, baseSequence (at PRODUCER_ID_AT).
PRODUCER: Final = struct.Struct(">qhi")
BASE_OFFSET: Final = struct.Struct(">q")
PARTITION_LEADER_EPOCH: Final = struct.Struct(">i")
CRC: Final = struct.Struct(">I")
ATTRIBUTES: Final = struct.Struct(">h")
LAST_OFFSET_DELTA: Final = struct.Struct(">i")
MAX_TIMESTAMP: Final = struct.Struct(">q")

# -- attribute bits --------------------------------------------------------------------------------

COMPRESSION_MASK: Final = 0x07  # 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
TIMESTAMP_TYPE_MASK: Final = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_FLAG: Final = 0x10
CONTROL_FLAG: Final = 0x20
DELETE_HORIZON_FLAG: Final = 0x40
