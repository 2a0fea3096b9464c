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
  AlterPartitionReassignments, ListPartitionReassignments, AlterClientQuotas): the active controller only;
  other voters answer NOT_CONTROLLER;
- ApiVersions and DescribeCluster, so tools can find the quorum and the active controller.

:func:`.admin.admin_handler_specs` binds the admin handlers alone to any
``AdminController``: a single node dispatches its admin requests to them in process, bound
to its :class:`~pydmq.controller.local.LocalController` (imported on its first admin request,
without the Raft and broker-lifecycle handlers); :func:`.listener.controller_handler_specs`
binds them all to a cluster's :class:`~pydmq.controller.runtime.ControllerRuntime`.
"""
