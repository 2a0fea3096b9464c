"""The admin handlers alone, bound to any
:class:`~pydmq.controller.handlers._common.AdminController` (a cluster's controller runtime,
or a single node's local controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.controller.handlers import (
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    elect_leaders,
    incremental_alter_configs,
    list_partition_reassignments,
    rest_answers,
)

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.controller.handlers._common import AdminController

__all__ = ["admin_handler_specs"]

_ADMIN_MODULES = (
    create_topics,
    delete_topics,
    alter_configs,
    create_partitions,
    elect_leaders,
    incremental_alter_configs,
    alter_partition_reassignments,
    list_partition_reassignments,
    create_acls,
    delete_acls,
    alter_client_quotas,
    alter_user_scram_credentials,
    rest_answers,
)


def admin_handler_specs(controller: AdminController) -> dict[int, ApiHandlerSpec]:
    """The admin handlers bound to ``controller``, by API key."""
    return {spec.api_key: spec for spec in (m.make_handler(controller) for m in _ADMIN_MODULES)}
