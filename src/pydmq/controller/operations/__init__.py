"""Sans-IO controller operations (``pydmq.controller.operations``).

Each operation takes the current :class:`~pydmq.metadata.image.MetadataImage`, an
:class:`OperationContext` (replication strategies, replica placer, broker config values) and
the request's values, and returns a :class:`ControllerResult`: the metadata records to commit
and the response to send once they are committed. Operations never change state and never do
I/O; the controller runtime runs them one at a time, so each sees the records of the previous
one already replayed into its image.

Modules: :mod:`.common` (result, context, elections), :mod:`.brokers`, :mod:`.topics`,
:mod:`.partitions` (AlterPartition, ElectLeaders), :mod:`.reassignment`, :mod:`.configs`,
:mod:`.acls` (CreateAcls, DeleteAcls), :mod:`.quotas` (AlterClientQuotas).
"""

from pydmq.controller.operations.acls import (
    AclCreationResult,
    AclDeletionResult,
    create_acls,
    delete_acls,
)
from pydmq.controller.operations.brokers import (
    BrokerHeartbeatReply,
    BrokerRegistrationReply,
    ControlledShutdownReply,
    ProducerIdsBlock,
    allocate_producer_ids,
    broker_heartbeat,
    controlled_shutdown,
    fence_brokers,
    fence_stale_brokers,
    register_broker,
    unfence_broker,
    unregister_broker,
)
from pydmq.controller.operations.common import (
    DEFAULT_STRATEGY,
    STRATEGY_CONFIG,
    ControllerResult,
    OperationContext,
    electable_brokers,
    image_after,
    move_replicas_away,
    operation_context,
    strategy_for,
)
from pydmq.controller.operations.configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterConfigsResource,
    ConfigResourceResult,
    IncrementalAlterConfigsResource,
    alter_configs,
    incremental_alter_configs,
)
from pydmq.controller.operations.partitions import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    AlterPartitionItem,
    AlterPartitionItemResult,
    AlterPartitionReply,
    ElectionResult,
    alter_partition,
    elect_leaders,
)
from pydmq.controller.operations.quotas import (
    ClientQuotaAlteration,
    ClientQuotaAlterationResult,
    alter_client_quotas,
)
from pydmq.controller.operations.reassignment import (
    OngoingReassignment,
    ReassignmentRequest,
    ReassignmentResult,
    alter_partition_reassignments,
    list_partition_reassignments,
)
from pydmq.controller.operations.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    DeleteTopicResult,
    create_partitions,
    create_topics,
    delete_topics,
)

__all__ = [
    "DEFAULT_STRATEGY",
    "ELECTION_PREFERRED",
    "ELECTION_UNCLEAN",
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "STRATEGY_CONFIG",
    "AclCreationResult",
    "AclDeletionResult",
    "AlterConfigsResource",
    "AlterPartitionItem",
    "AlterPartitionItemResult",
    "AlterPartitionReply",
    "BrokerHeartbeatReply",
    "BrokerRegistrationReply",
    "ClientQuotaAlteration",
    "ClientQuotaAlterationResult",
    "ConfigResourceResult",
    "ControlledShutdownReply",
    "ControllerResult",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreatePartitionsResult",
    "CreatePartitionsTopic",
    "DeleteTopicResult",
    "ElectionResult",
    "IncrementalAlterConfigsResource",
    "OngoingReassignment",
    "OperationContext",
    "ProducerIdsBlock",
    "ReassignmentRequest",
    "ReassignmentResult",
    "allocate_producer_ids",
    "alter_client_quotas",
    "alter_configs",
    "alter_partition",
    "alter_partition_reassignments",
    "broker_heartbeat",
    "controlled_shutdown",
    "create_acls",
    "create_partitions",
    "create_topics",
    "delete_acls",
    "delete_topics",
    "elect_leaders",
    "electable_brokers",
    "fence_brokers",
    "fence_stale_brokers",
    "image_after",
    "incremental_alter_configs",
    "list_partition_reassignments",
    "move_replicas_away",
    "operation_context",
    "register_broker",
    "strategy_for",
    "unfence_broker",
    "unregister_broker",
]
