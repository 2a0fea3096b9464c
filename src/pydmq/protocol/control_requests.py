"""Values of the controller-to-broker requests (LeaderAndIsr, UpdateMetadata) that both ends use.

The active controller builds these requests (:mod:`pydmq.controller.propagation`) and a broker
applies them (:mod:`pydmq.broker.cluster`); the values are Kafka's, so they live with the wire.

- ``type_`` of LeaderAndIsr and UpdateMetadata: :data:`FULL` (2) for the full-state variants
  sent after a broker (re)registers, reconnects or the controller fails over, :data:`INCREMENTAL`
  (1) otherwise (Kafka's ``AbstractControlRequest.Type``; 0 means unknown).
- :data:`LEADER_DURING_DELETE` (-2): the leader of a partition of a topic being deleted in an
  UpdateMetadata, as Kafka's ZooKeeper-era controller marked them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["FULL", "INCREMENTAL", "LEADER_DURING_DELETE"]

INCREMENTAL: Final = 1
FULL: Final = 2
LEADER_DURING_DELETE: Final = -2
