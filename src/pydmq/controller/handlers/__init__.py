"""Handlers of the controller listener(s): one module per API, each ``make_handler(runtime)``
(the admin ones ``make_handler(controller)``, typed against the
:class:`~pydmq.controller.handlers._common.AdminController` port).

Served by a :class:`~pydmq.api.dispatcher.RequestDispatcher` of their own, so clients on a
broker listener never reach them and the controller listener serves nothing else. Three
groups:

- the Raft RPCs of ``__cluster_metadata`` (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
  FetchSnapshot, DescribeQuorum), answered by the Raft core on any voter;
- broker lifecycle (BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds,
  ControlledShutdown) and the admin requests brokers forward unchanged (CreateTopics,
  DeleteTopics, CreatePartitions, IncrementalAlterConfigs, AlterConfigs, ElectLeaders,
  AlterPartitionReassignments, ListPartitionReassignments): the active controller only;
  other voters answer NOT_CONTROLLER;
- ApiVersions and DescribeCluster, so tools can find the quorum and the active controller.

:func:`admin_handler_specs` binds the admin handlers alone to any ``AdminController``: a
single node dispatches its admin requests to them in process, bound to its
:class:`~pydmq.controller.local.LocalController` (imported on its first admin request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.controller.handlers import (
    allocate_producer_ids,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    api_versions,
    begin_quorum_epoch,
    broker_heartbeat,
    broker_registration,
    controlled_shutdown,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_quorum,
    elect_leaders,
    end_quorum_epoch,
    fetch,
    fetch_snapshot,
    incremental_alter_configs,
    list_partition_reassignments,
    vote,
)

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.controller.handlers._common import AdminController
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["admin_handler_specs", "controller_handler_specs"]

_ADMIN_MODULES = (
    create_topics,
    delete_topics,
    alter_configs,
    create_partitions,
    elect_leaders,
    incremental_alter_configs,
    alter_partition_reassignments,
    list_partition_reassignments,
)
_MODULES = (
    fetch,
    controlled_shutdown,
    api_versions,
    vote,
    begin_quorum_epoch,
    end_quorum_epoch,
    describe_quorum,
    alter_partition,
    fetch_snapshot,
    describe_cluster,
    broker_registration,
    broker_heartbeat,
    allocate_producer_ids,
)


def admin_handler_specs(controller: AdminController) -> dict[int, ApiHandlerSpec]:
    """The admin handlers bound to ``controller``, by API key."""
    return {spec.api_key: spec for spec in (m.make_handler(controller) for m in _ADMIN_MODULES)}


def controller_handler_specs(runtime: ControllerRuntime) -> dict[int, ApiHandlerSpec]:
    """Every controller-listener handler bound to ``runtime``, by API key."""
    specs = [module.make_handler(runtime) for module in _MODULES]
    specs.extend(admin_handler_specs(runtime).values())
    return {spec.api_key: spec for spec in sorted(specs, key=lambda s: s.api_key)}
