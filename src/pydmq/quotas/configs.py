"""The client quota entity types and keys, with Kafka's names and config types.

A user or client-id entity (or both) takes the four user/client keys; an ip entity only
``connection_creation_rate`` (Kafka's ``QuotaConfig.userAndClientQuotaConfigs`` and
``ipConfigs``). The type decides AlterClientQuotas' checks of a value (LONG and INT values are
whole numbers within range; DOUBLE any finite number above 0).
"""

from __future__ import annotations

from enum import Enum
from typing import Final

__all__ = [
    "CLIENT_ID",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "ENTITY_TYPES",
    "IP",
    "IP_QUOTA_KEYS",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "USER",
    "USER_CLIENT_QUOTA_KEYS",
    "QuotaKeyType",
]

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = frozenset((USER, CLIENT_ID, IP))

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"


class QuotaKeyType(Enum):
    """Kafka's ConfigDef type of a quota key, with its largest value and its article."""

    LONG = ("a LONG", float(2**63 - 1))
    INT = ("an INT", float(2**31 - 1))
    DOUBLE = ("a DOUBLE", float("inf"))

    def __init__(self, named: str, largest: float) -> None:
        self.named = named
        self.largest = largest


USER_CLIENT_QUOTA_KEYS: Final = {
    PRODUCER_BYTE_RATE: QuotaKeyType.LONG,
    CONSUMER_BYTE_RATE: QuotaKeyType.LONG,
    REQUEST_PERCENTAGE: QuotaKeyType.DOUBLE,
    CONTROLLER_MUTATION_RATE: QuotaKeyType.DOUBLE,
}
IP_QUOTA_KEYS: Final = {CONNECTION_CREATION_RATE: QuotaKeyType.INT}
