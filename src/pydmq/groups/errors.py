"""How a group API answers the failure of a ``__consumer_offsets`` write (Kafka's mapping)."""

from __future__ import annotations

from pydmq.protocol.errors import ErrorCode

__all__ = ["coordinator_error"]


def coordinator_error(code: int, *, offsets: bool = False) -> int:
    """A produce error of a ``__consumer_offsets`` append as a group API answers it (Kafka's
    mapping): unavailable partition or replicas -> COORDINATOR_NOT_AVAILABLE, leadership lost
    -> NOT_COORDINATOR, too large -> INVALID_COMMIT_OFFSET_SIZE (offsets) or
    UNKNOWN_SERVER_ERROR."""
    match code:
        case (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            | ErrorCode.NOT_ENOUGH_REPLICAS
            | ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | ErrorCode.REQUEST_TIMED_OUT
        ):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        case ErrorCode.NOT_LEADER_OR_FOLLOWER | ErrorCode.KAFKA_STORAGE_ERROR:
            return ErrorCode.NOT_COORDINATOR
        case (
            ErrorCode.MESSAGE_TOO_LARGE
            | ErrorCode.RECORD_LIST_TOO_LARGE
            | ErrorCode.INVALID_FETCH_SIZE
        ):
            return (
                ErrorCode.INVALID_COMMIT_OFFSET_SIZE if offsets else ErrorCode.UNKNOWN_SERVER_ERROR
            )
        case _:
            return code
