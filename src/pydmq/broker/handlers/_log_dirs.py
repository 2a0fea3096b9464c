"""This node's log directory as DescribeLogDirs and AlterReplicaLogDirs name it.

pydmq keeps every partition of a node in one log dir (the first of ``log.dirs``); Kafka names
a log dir by its absolute path. The dir is offline once a storage failure took it offline
(:attr:`ReplicaManager.offline_log_dirs <pydmq.replication.replica_manager.ReplicaManager>`)
until the node restarts. Read on the event loop by the handlers; no state of its own.
"""

from __future__ import annotations

import os

from pydmq.broker.services import BrokerServices

__all__ = ["log_dir_offline", "log_dir_path"]


def log_dir_path(broker: BrokerServices) -> str:
    """The absolute path of the node's log dir (not resolving symlinks, as Java's
    ``File.getAbsolutePath``)."""
    return os.path.abspath(broker.log_dir)


def log_dir_offline(broker: BrokerServices) -> bool:
    """Whether a storage failure took the log dir offline (checked now, as Kafka's
    LogDirFailureChannel would have reported it)."""
    return broker.replica_manager.check_log_dirs()
