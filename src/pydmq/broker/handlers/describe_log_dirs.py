"""DescribeLogDirs (key 35), v1-v4 (Kafka 4.0's range, the release pydmq advertises).

One result: this node's log dir (its absolute path; pydmq has one per node), with the
partitions it hosts (leaders and followers alike): ``partition_size`` the bytes of the
partition's log, ``offset_lag`` 0 (Kafka: the high watermark minus the log end offset, never
below 0, for a current replica; pydmq has no future replicas, so ``is_future_key`` is always
false). ``topics`` null lists every hosted partition; otherwise only the named partitions this
node hosts (a topic none of whose partitions is hosted here is left out, unknown ones too, as
Kafka does). v4 adds ``total_bytes`` and ``usable_bytes`` of the file system holding the dir
(``statvfs``: all blocks, and the blocks available to an unprivileged user, as Java's
``getTotalSpace``/``getUsableSpace``). v5 (``is_cordoned``, KIP-1066, Kafka 4.3) is not
advertised: kafka-python infers the broker's release from the highest DescribeLogDirs version
and would then take pydmq for Kafka 4.3 and use versions of other APIs pydmq lacks. An offline log dir answers KAFKA_STORAGE_ERROR with no topics. The
top-level error (v3+) is NONE: no authorizer.

Authorization (as Kafka): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED and no
results.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._log_dirs import log_dir_offline, log_dir_path
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from pydmq.replication.partition import Partition
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]


def _wanted(ctx: BrokerContext, request: DescribeLogDirsRequest) -> Iterable[Partition]:
    hosted = ctx.broker.replica_manager.partitions
    if request.topics is None:
        return sorted(hosted.values(), key=lambda p: (p.tp.topic, p.tp.partition))
    found: dict[TopicPartition, Partition] = {}
    for topic in request.topics:
        for index in topic.partitions:
            tp = TopicPartition(topic.topic, index)
            partition = hosted.get(tp)
            if partition is not None:
                found[tp] = partition
    return found.values()


def _describe(partition: Partition) -> DescribeLogDirsPartition:
    log = partition.log
    return DescribeLogDirsPartition(
        partition_index=partition.tp.partition,
        partition_size=log.engine_log.size_in_bytes,
        offset_lag=max(log.high_watermark - log.log_end_offset, 0),
        is_future_key=False,
    )


def handle(ctx: BrokerContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not authorized_cluster(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker = ctx.broker
    path = log_dir_path(broker)
    result = DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=path)
    if log_dir_offline(broker):
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        return DescribeLogDirsResponse(results=[result])
    topics: dict[str, DescribeLogDirsTopic] = {}
    for partition in _wanted(ctx, request):
        name = partition.tp.topic
        topic = topics.get(name)
        if topic is None:
            topic = topics[name] = DescribeLogDirsTopic(name=name)
            result.topics.append(topic)
        topic.partitions.append(_describe(partition))
    if ctx.api_version >= 4:
        stats = os.statvfs(path)
        result.total_bytes = stats.f_blocks * stats.f_frsize
        result.usable_bytes = stats.f_bavail * stats.f_frsize
    return DescribeLogDirsResponse(results=[result])


HANDLER = ApiHandlerSpec(35, 1, 4, handle, "DescribeLogDirs")
