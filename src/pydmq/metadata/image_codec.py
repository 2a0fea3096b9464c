"""Encoded records in bulk: an image as a snapshot's records, and records replayed at start.

A snapshot holds one PartitionRecord per partition, and a node replays all of them when it
starts (a single node: ``Broker()``). Most partitions of a cluster share their placement (on
a single node every one has replicas ``[node]``, ISR ``[node]``, leader ``node``, epochs 0),
and a PartitionRecord (version 0) is ``type | version | partition id | topic id`` followed by
fields that depend on the placement alone. So both directions work per distinct placement,
not per partition:

* :func:`image_payloads` encodes the fields after the topic id once per distinct placement
  and prefixes each partition's ids;
* :class:`RecordReplayer` decodes a PartitionRecord fully (every check of
  :func:`~pydmq.metadata.records.decode_record`) the first time its bytes after the topic id
  are seen, and replays the partitions whose bytes are equal to that, and so decode to equal
  values, as the same immutable registration. Every other record is decoded and replayed as
  usual.

The bytes are exactly those of :func:`~pydmq.metadata.records.encode_record`, so a snapshot
written here reads back anywhere, and a snapshot written anywhere replays here (at the old
cost per record when its partitions do not share placements). A change of PartitionRecord's
version or layout fails ``tests/unit/metadata/test_image_codec.py``.

Sans-IO: no asyncio, sockets or files. A :class:`RecordReplayer` is owned by whoever replays
one delta; :func:`image_payloads` only reads its (immutable) image, from any thread.
"""

from __future__ import annotations

import struct
from typing import Final
from uuid import UUID

from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage, PartitionRegistration
from pydmq.metadata.records import (
    PartitionRecord,
    decode_record,
    encode_record,
    payload_frames,
)
from pydmq.protocol.primitives import Buffer

__all__ = ["RecordReplayer", "image_payloads"]

_PARTITION_HEADER: Final = struct.pack(">hh", 3, 0)  # PartitionRecord (Kafka's type 3), v0
_HEADER_SIZE: Final = len(_PARTITION_HEADER)
_IDS: Final = struct.Struct(">i16s")  # partition id, topic id
_PLACEMENT_AT: Final = _HEADER_SIZE + _IDS.size  # where the shared fields start


def image_payloads(image: MetadataImage) -> list[bytes]:
    """The encoded records of ``image.to_records()``, in that order (a snapshot's payloads)."""
    placements: dict[tuple[object, ...], bytes] = {}
    out: list[bytes] = []
    for rec in image.to_records():
        if not isinstance(rec, PartitionRecord):
            out.append(encode_record(rec))
            continue
        key = (
            rec.replicas,
            rec.isr,
            rec.removing_replicas,
            rec.adding_replicas,
            rec.leader,
            rec.leader_recovery_state,
            rec.leader_epoch,
            rec.partition_epoch,
        )
        placement = placements.get(key)
        if placement is None:
            placement = placements[key] = encode_record(rec)[_PLACEMENT_AT:]
        out.append(_PARTITION_HEADER + _IDS.pack(rec.partition_id, rec.topic_id.bytes) + placement)
    return out


class RecordReplayer:
    """Replays encoded records into one :class:`MetadataDelta`; see the module docstring.

    Consecutive partitions of one topic are handed to the delta together
    (:meth:`MetadataDelta.replay_partitions`), before any other record and by :meth:`apply`.
    Raises :class:`~pydmq.metadata.records.CorruptRecordError` for a record that does not
    decode and :class:`~pydmq.metadata.delta.MetadataReplayError` for one that does not apply,
    as decoding and replaying them one by one would.
    """

    def __init__(self, delta: MetadataDelta) -> None:
        self._delta = delta
        self._placements: dict[bytes, PartitionRegistration] = {}
        self._run_topic = b""  # the raw topic id of the partitions in _run
        self._run: dict[int, PartitionRegistration] = {}

    def replay_record(self, payload: Buffer) -> None:
        """Replay one :func:`~pydmq.metadata.records.encode_record` record."""
        data = bytes(payload)
        if data[:_HEADER_SIZE] != _PARTITION_HEADER or len(data) <= _PLACEMENT_AT:
            self._end_run()
            self._delta.replay(decode_record(data))
            return
        registration = self._placements.get(data[_PLACEMENT_AT:])
        if registration is None:
            rec = decode_record(data)  # the first of its placement: every check
            assert isinstance(rec, PartitionRecord)
            registration = self._placements[data[_PLACEMENT_AT:]] = (
                PartitionRegistration.from_record(rec)
            )
        partition_id, raw_topic_id = _IDS.unpack_from(data, _HEADER_SIZE)
        if raw_topic_id != self._run_topic:
            self._end_run()
            self._run_topic = raw_topic_id
        self._run[partition_id] = registration

    def replay_payload(self, payload: Buffer) -> int:
        """Replay the records of one :func:`~pydmq.metadata.records.encode_payload` entry;
        how many there were."""
        count = 0
        for frame in payload_frames(payload):
            self.replay_record(frame)
            count += 1
        return count

    def apply(self, offset: int, epoch: int) -> MetadataImage:
        """The image after every record replayed (:meth:`MetadataDelta.apply`)."""
        self._end_run()
        return self._delta.apply(offset, epoch)

    def _end_run(self) -> None:
        if self._run:
            self._delta.replay_partitions(UUID(bytes=self._run_topic), self._run)
            self._run = {}
