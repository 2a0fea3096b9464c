"""LocalMetadataLog: a single node's metadata log, replayed into a ``MetadataImage``.

A node without ``controller.quorum.voters`` keeps its metadata as a cluster's controller
does: KRaft records (:mod:`pydmq.metadata.records`) that only change state when replayed
into a :class:`~pydmq.metadata.delta.MetadataDelta`, the records of one change appended as
ONE entry (the controller's payload framing, :func:`~pydmq.metadata.records.encode_payload`)
to a :class:`~pydmq.raft.file_log.FileRaftLog` in ``<log.dirs>/__pydmq_metadata/metadata-log/``
(CRC32C frames, torn tails cut at recovery, atomic snapshot files).

There is no Raft quorum here: one writer, and an entry is committed once it is flushed
(fsync), before :meth:`LocalMetadataLog.append` returns. A one-voter Raft core would add its
election, its leader-change entry and its import cost (``raft.core``) to every single node's
start-up for nothing a single writer needs; the log, the records and the snapshots are the
same as the cluster's.

At start the latest snapshot is loaded and every entry after it replayed (a
:class:`~pydmq.metadata.image_codec.RecordReplayer`: partitions that share their placement
are decoded once). Every ``metadata.log.max.snapshot.interval.records`` appended records a
snapshot of the image is taken (``image.to_records()``, as the controller runtime does), so
the log does not grow forever. Encoding and writing it (~0.1 s beside 30,000 partitions) is
done on the ``metadata-snapshot`` thread, from the image of that moment (immutable), so the
event loop goes on serving; the log adopts the written snapshot (drops the segments below
it) at the first append or :meth:`LocalMetadataLog.close` after it is written. One snapshot
is in flight at a time; a failed one is logged and retried after the next append.

Write failures: an append whose write fails is undone by the log and changes nothing; a
failed fsync takes the log offline until a restart (``MetadataLogOfflineError``). Both are
raised as :class:`~pydmq.storage.errors.KafkaStorageError` (answered KAFKA_STORAGE_ERROR),
and the image stays as it was.

Before the log held them, a single node kept its dynamic broker configs in
``<log.dirs>/__pydmq_metadata/dynamic_broker_configs.json``: on the first start after the
upgrade :func:`convert_dynamic_broker_configs` turns that file into ConfigRecords of BROKER
resources (one entry) and renames it ``dynamic_broker_configs.json.converted`` (a backup, never
read again).

Owned by the broker's event loop; not thread-safe. The snapshot thread only reads its image
and writes the snapshot's own file (:meth:`FileRaftLog.write_snapshot_file`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Final, NamedTuple

from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.image_codec import RecordReplayer, image_payloads
from pydmq.metadata.records import RESOURCE_BROKER, ConfigRecord, MetadataRecord, encode_payload
from pydmq.raft.file_log import FileRaftLog, MetadataLogOfflineError
from pydmq.raft.log import Entry, SnapshotId
from pydmq.storage.checkpoint import fsync_dir
from pydmq.storage.errors import KafkaStorageError

__all__ = [
    "DYNAMIC_BROKER_CONFIGS_FILE",
    "LOCAL_EPOCH",
    "LocalMetadataLog",
    "convert_dynamic_broker_configs",
]

log = logging.getLogger(__name__)

LOCAL_EPOCH: Final = 0
"""The epoch of every entry: a single node never changes leader."""
_READ_BYTES: Final = 1 << 20
DYNAMIC_BROKER_CONFIGS_FILE: Final = "dynamic_broker_configs.json"
"""The file of earlier releases, in the metadata dir (see the module docstring)."""
_CONVERTED_SUFFIX: Final = ".converted"


class LocalMetadataLog:
    """The records of a single node's metadata, and the image they replay to."""

    def __init__(self, directory: Path, *, snapshot_interval_records: int) -> None:
        self.directory = directory
        self._snapshot_interval_records = snapshot_interval_records
        self._log = FileRaftLog(str(directory))
        self._records_since_snapshot = 0
        self._executor: ThreadPoolExecutor | None = None  # the metadata-snapshot thread
        self._snapshotting: _Snapshotting | None = None
        self.image = self._replay()

    @property
    def is_empty(self) -> bool:
        """True when nothing was ever appended (no entry, no snapshot)."""
        return self._log.log_end_offset == 0

    def _replay(self) -> MetadataImage:
        """The image of the latest snapshot and every entry after it (a
        :class:`~pydmq.metadata.image_codec.RecordReplayer` each: partitions that share their
        placement are decoded once)."""
        image = MetadataImage.EMPTY
        snapshot = self._log.latest_snapshot()
        if snapshot is not None:
            replayer = RecordReplayer(MetadataDelta(image))
            for payload in self._log.load_snapshot(snapshot):
                replayer.replay_record(payload)
            image = replayer.apply(snapshot.end_offset - 1, snapshot.epoch)
        end = self._log.log_end_offset
        while image.offset + 1 < end:
            entries = self._log.read(image.offset + 1, _READ_BYTES)
            replayer = RecordReplayer(MetadataDelta(image))
            for entry in entries:
                self._records_since_snapshot += replayer.replay_payload(entry.payload)
            image = replayer.apply(entries[-1].offset, entries[-1].epoch)
        return image

    def append(self, records: Sequence[MetadataRecord]) -> MetadataDelta:
        """Commit ``records`` as one entry; the delta they made (``image`` is the new one).

        The records are replayed before anything is written, so records that do not apply
        (``MetadataReplayError``) are never in the log. Raises KafkaStorageError when the
        entry could not be written or flushed; the image is then unchanged.
        """
        delta = MetadataDelta(self.image)
        for rec in records:
            delta.replay(rec)
        try:
            offset = self._log.log_end_offset
            self._log.append([Entry(offset, LOCAL_EPOCH, encode_payload(records))])
            self._log.flush()
        except MetadataLogOfflineError as exc:
            raise KafkaStorageError(str(exc), str(self.directory), offline=True) from exc
        except OSError as exc:
            message = f"metadata log {self.directory}: {exc}"
            raise KafkaStorageError(message, str(self.directory), offline=False) from exc
        self.image = delta.apply(offset, LOCAL_EPOCH)
        self._records_since_snapshot += len(records)
        self._adopt_snapshot(wait=False)
        if self._snapshotting is None and (
            self._records_since_snapshot >= self._snapshot_interval_records
        ):
            self._start_snapshot()
        return delta

    def _start_snapshot(self) -> None:
        """Hand the current image to the snapshot thread."""
        image = self.image
        try:
            snapshot_id = self._log.begin_snapshot(image.offset + 1, LOCAL_EPOCH)
        except Exception:
            log.exception("snapshot of the metadata log at offset %d failed", image.offset + 1)
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="metadata-snapshot")
        future = self._executor.submit(self._write_snapshot, snapshot_id, image)
        self._snapshotting = _Snapshotting(snapshot_id, self._records_since_snapshot, future)
        self._records_since_snapshot = 0

    def _write_snapshot(self, snapshot_id: SnapshotId, image: MetadataImage) -> int:
        """On the snapshot thread: encode ``image`` and write its file; how many records."""
        payloads = image_payloads(image)
        self._log.write_snapshot_file(snapshot_id, payloads)
        return len(payloads)

    def _adopt_snapshot(self, *, wait: bool) -> None:
        """Adopt the snapshot in flight once it is written (``wait``: wait for it)."""
        pending = self._snapshotting
        if pending is None or not (wait or pending.future.done()):
            return
        self._snapshotting = None
        end = pending.snapshot_id.end_offset
        try:
            count = pending.future.result()
            self._log.adopt_snapshot(pending.snapshot_id)
        except Exception:
            log.exception("snapshot of the metadata log at offset %d failed", end)
            self._records_since_snapshot += pending.records  # retried after the next append
            return
        log.info("metadata log snapshot at offset %d (%d records)", end, count)

    def close(self) -> None:
        """Finish the snapshot in flight, then close the log files."""
        self._adopt_snapshot(wait=True)
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
        self._log.close()


class _Snapshotting(NamedTuple):
    """A snapshot handed to the snapshot thread, and the records it covers since the last."""

    snapshot_id: SnapshotId
    records: int
    future: Future[int]


def convert_dynamic_broker_configs(
    metadata_log: LocalMetadataLog, path: Path, node_id: int
) -> None:
    """Convert a ``dynamic_broker_configs.json`` of an earlier release (``cluster_default``:
    the "" resource, ``broker``: this node's) into ConfigRecords, then rename it.

    Only values the image does not hold already become records, so a crash after the entry
    was flushed and before the rename converts nothing twice. A failed append raises
    KafkaStorageError and leaves the file in place, for the next start."""
    if not path.exists():
        return
    saved = json.loads(path.read_text(encoding="utf-8"))
    layers: dict[str, Mapping[str, str]] = {
        "": saved.get("cluster_default", {}),
        str(node_id): saved.get("broker", {}),
    }
    image = metadata_log.image
    records: list[MetadataRecord] = [
        ConfigRecord(RESOURCE_BROKER, resource, name, str(value))
        for resource, layer in layers.items()
        for name, value in sorted(layer.items())
        if image.broker_config(resource).get(name) != str(value)
    ]
    if records:
        metadata_log.append(records)
    os.replace(path, path.with_name(path.name + _CONVERTED_SUFFIX))
    fsync_dir(str(path.parent))
    log.info("converted %s into the metadata log (%d records)", path, len(records))
