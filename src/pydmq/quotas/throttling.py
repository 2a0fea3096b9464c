"""How a throttled client is made to wait: which request versions mute the connection.

Since KIP-219 a broker answers a throttled request at once, with ``throttle_time_ms`` set,
and then stops reading the client's requests for that time; the client also waits by itself.
A client older than the KIP (Produce before v6, Fetch before v8, and each API before the
version Kafka's ``shouldClientThrottle`` names) does not wait by itself: its response is
delayed by the throttle time instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["CLIENT_THROTTLES_FROM", "client_throttles"]

CLIENT_THROTTLES_FROM: Final[Mapping[int, int]] = MappingProxyType(
    {
        0: 6,  # Produce
        1: 8,  # Fetch
        2: 3,  # ListOffsets
        3: 6,  # Metadata
        8: 4,  # OffsetCommit
        9: 4,  # OffsetFetch
        10: 2,  # FindCoordinator
        11: 3,  # JoinGroup
        12: 2,  # Heartbeat
        13: 2,  # LeaveGroup
        14: 2,  # SyncGroup
        15: 2,  # DescribeGroups
        16: 2,  # ListGroups
        18: 2,  # ApiVersions
        19: 3,  # CreateTopics
        20: 2,  # DeleteTopics
        21: 1,  # DeleteRecords
        22: 1,  # InitProducerId
        24: 1,  # AddPartitionsToTxn
        25: 1,  # AddOffsetsToTxn
        26: 1,  # EndTxn
        28: 1,  # TxnOffsetCommit
        32: 2,  # DescribeConfigs
        33: 1,  # AlterConfigs
        34: 1,  # AlterReplicaLogDirs
        35: 1,  # DescribeLogDirs
        37: 1,  # CreatePartitions
    }
)
"""API key -> the first version whose client waits out a throttle itself (the versions
KIP-219 bumped); the APIs not listed are newer than the KIP: every version waits itself."""


def client_throttles(api_key: int, api_version: int) -> bool:
    """Whether a client of this request version waits out ``throttle_time_ms`` itself (the
    broker mutes it after the response), or its response must be delayed."""
    return api_version >= CLIENT_THROTTLES_FROM.get(api_key, 0)
