"""What a broker keeps for share groups (KIP-932): the groups it coordinates
(:class:`~pydmq.shares.group.ShareGroups`), the share sessions of its ShareFetch clients
(:class:`~pydmq.shares.sessions.ShareSessionCache`) and the share-partitions it leads
(:class:`~pydmq.shares.manager.SharePartitionManager`, persisting their state with the share
coordinators through :class:`~pydmq.shares.persister.SharePersister`), tied together: a member that leaves
its group, or whose session times out, loses its share session and its acquired records.

Built once by the broker; used by the share handlers on the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from pydmq.config.share import ShareSettings
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.shares.group import ShareGroup, ShareGroups, TopicPartitions
from pydmq.shares.manager import SharePartitionManager
from pydmq.shares.offsets import ShareGroupOffsets, TopicRegistry
from pydmq.shares.partition import SharePartitionLimits
from pydmq.shares.persister import RemoteStates, SharePersister
from pydmq.shares.sessions import ShareSessionCache

__all__ = ["ShareGroupService"]


def _wall_clock_ms() -> int:
    return int(time.monotonic() * 1000)


class ShareGroupService:
    """The broker's share groups, share sessions and share-partitions (see the module)."""

    def __init__(
        self,
        settings: ShareSettings,
        replica_manager: ReplicaManager,
        topics: TopicPartitions,
        persister: SharePersister | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        group_config: Callable[[str], Mapping[str, str]] = lambda _group_id: {},
        topic_registry: TopicRegistry | None = None,
        remote: RemoteStates | None = None,
    ) -> None:
        self.settings = settings
        # The configs set on a group id (GROUP config resource), as this node's metadata has them.
        self.group_config = group_config
        self.clock_ms = clock_ms
        self.topics = topics
        self.groups = ShareGroups(settings.session_timeout_ms, settings.heartbeat_interval_ms)
        self.sessions = ShareSessionCache(settings.max_share_sessions)
        self.partitions = SharePartitionManager(
            replica_manager,
            SharePartitionLimits(
                max_record_locks=settings.partition_max_record_locks,
                record_lock_duration_ms=settings.record_lock_duration_ms,
                delivery_count_limit=settings.delivery_count_limit,
            ),
            clock_ms,
            persister,
            group_config,
        )
        self.groups.on_member_removed = self._member_removed
        # The group's offsets through the share coordinators (None: nothing persisted).
        self.offsets: ShareGroupOffsets | None = None
        if persister is not None and topic_registry is not None:
            self.offsets = ShareGroupOffsets(
                persister.node_id,
                persister,
                self.partitions,
                replica_manager,
                lambda: iter(topic_registry),
                topic_registry.by_id,
                remote,
            )

    def _member_removed(self, group_id: str, member_id: str) -> None:
        session = self.sessions.remove(group_id, member_id)
        if session is not None:
            self.partitions.release_member(group_id, member_id, session.partitions)

    def expire_members(self) -> None:
        """Remove the members of every group whose session timed out (the broker's
        maintenance task calls this every few seconds)."""
        now = self.clock_ms()
        for group in list(self.groups.groups.values()):
            self.groups.expire_sessions(group, self.topics, now)

    def is_empty(self, group_id: str) -> bool:
        """Whether ``group_id`` has no members (an unknown group has none)."""
        group = self.groups.groups.get(group_id)
        return group is None or not group.members

    def ensure_group(self, group_id: str) -> None:
        """Create ``group_id`` as an empty share group when unknown (AlterShareGroupOffsets)."""
        self.groups.groups.setdefault(group_id, ShareGroup(group_id))

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: its membership goes (its share-partitions' state is
        deleted through :attr:`offsets`)."""
        return self.groups.delete(group_id)
