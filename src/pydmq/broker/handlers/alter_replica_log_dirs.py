"""AlterReplicaLogDirs (key 34), v1-v2 (Kafka 4.x's range).

Moves replicas between the log dirs of one broker (JBOD). A pydmq node has one log dir, so
the only destination it has is that dir, where its replicas already are. As Kafka 4.4
answers (observed against the reference broker):

- destination = this node's log dir (its absolute path): NONE for each partition hosted here
  (already there: nothing to move), UNKNOWN_TOPIC_OR_PARTITION for one not hosted here;
  KAFKA_STORAGE_ERROR while the dir is offline;
- any other path (made absolute as Java's ``File.getAbsolutePath``): LOG_DIR_NOT_FOUND for
  every partition named with it, hosted or not.

A partition named under two dirs takes the last one (Kafka builds a map); results are
grouped by topic in the order topics are first named. v2 is flexible.

Authorization (as Kafka): ALTER on the cluster, else every partition is
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import os

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._log_dirs import log_dir_offline, log_dir_path
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    broker = ctx.broker
    own = log_dir_path(broker)
    destinations: dict[TopicPartition, str] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                destinations[TopicPartition(topic.name, index)] = entry.path
    offline = bool(destinations) and log_dir_offline(broker)
    allowed = authorized_cluster(ctx, AclOperation.ALTER)
    hosted = broker.replica_manager.partitions
    results: dict[str, AlterReplicaLogDirTopicResult] = {}
    response = AlterReplicaLogDirsResponse()
    for tp, path in destinations.items():
        if not allowed:
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif os.path.abspath(path) != own:
            code = ErrorCode.LOG_DIR_NOT_FOUND
        elif offline:
            code = ErrorCode.KAFKA_STORAGE_ERROR
        elif tp in hosted:
            code = ErrorCode.NONE
        else:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        result = results.get(tp.topic)
        if result is None:
            result = results[tp.topic] = AlterReplicaLogDirTopicResult(topic_name=tp.topic)
            response.results.append(result)
        result.partitions.append(
            AlterReplicaLogDirPartitionResult(partition_index=tp.partition, error_code=code)
        )
    return response


HANDLER = ApiHandlerSpec(34, 1, 2, handle, "AlterReplicaLogDirs")
