"""Client-side errors: a Kafka error code with Kafka's name, plus connection failures."""

from __future__ import annotations

from pydmq.protocol.errors import ErrorCode, retriable

__all__ = [
    "BrokerUnreachableError",
    "KafkaConnectionError",
    "KafkaError",
    "UnsupportedApiError",
    "error_name",
    "raise_for_error",
]


def error_name(code: int) -> str:
    """Kafka's name for ``code`` (``UNKNOWN_ERROR_<n>`` for codes we do not know)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class KafkaError(Exception):
    """An error reported by a broker (or detected by the client) as a Kafka error code."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = int(code)
        self.name = error_name(self.code)
        self.message = message or ""
        super().__init__(f"{self.name}: {self.message}" if self.message else self.name)

    @property
    def retriable(self) -> bool:
        return retriable(self.code)


class KafkaConnectionError(KafkaError):
    """The broker could not be reached, or the connection broke mid-request."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class BrokerUnreachableError(KafkaConnectionError):
    """No connection could be opened (refused, unreachable, timed out): nothing was sent, so
    the request may go to another broker as it is."""


class UnsupportedApiError(KafkaError):
    """The broker does not advertise an API (or no version both sides support)."""

    def __init__(self, api_key: int, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)
        self.api_key = api_key


def raise_for_error(code: int, message: str | None = None, context: str = "") -> None:
    """Raise :class:`KafkaError` unless ``code`` is NONE (0)."""
    if code:
        text = message or ""
        if context:
            text = f"{context}: {text}" if text else context
        raise KafkaError(code, text)
