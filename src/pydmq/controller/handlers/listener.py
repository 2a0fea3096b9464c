"""Every handler of the controller listener, bound to a cluster's controller runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.sasl import SASL_AUTHENTICATE_HANDLER, SASL_HANDSHAKE_HANDLER
from pydmq.controller.handlers import (
    allocate_producer_ids,
    alter_partition,
    api_versions,
    broker_heartbeat,
    broker_registration,
    controlled_shutdown,
    describe_cluster,
    describe_quorum,
)
from pydmq.controller.handlers.admin import admin_handler_specs
from pydmq.controller.handlers.raft import raft_handler_specs

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["controller_handler_specs"]

_MODULES = (
    controlled_shutdown,
    api_versions,
    describe_quorum,
    alter_partition,
    describe_cluster,
    broker_registration,
    broker_heartbeat,
    allocate_producer_ids,
)


def controller_handler_specs(runtime: ControllerRuntime) -> dict[int, ApiHandlerSpec]:
    """Every controller-listener handler bound to ``runtime``, by API key."""
    specs = [module.make_handler(runtime) for module in _MODULES]
    specs.extend(raft_handler_specs(runtime))
    specs.extend(admin_handler_specs(runtime).values())
    specs.extend((SASL_HANDSHAKE_HANDLER, SASL_AUTHENTICATE_HANDLER))
    return {spec.api_key: spec for spec in sorted(specs, key=lambda s: s.api_key)}
