"""Kafka's ACL operation codes, as the ``*_authorized_operations`` fields report them.

pydmq has no authorizer: a request asking for authorized operations is given every operation
the resource type supports, as Kafka answers a principal allowed everything.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CLUSTER_OPERATIONS"]

# AclOperation codes the CLUSTER resource supports: CREATE 5, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
CLUSTER_OPERATIONS: Final = sum(1 << code for code in (5, 7, 8, 9, 10, 11, 12))
