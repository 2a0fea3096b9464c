"""Why a controller could not run or commit an operation: the error every item of the
request then answers (raised by :class:`~pydmq.controller.runtime.ControllerRuntime` and
:class:`~pydmq.controller.local.LocalController`, mapped by the admin handlers)."""

from __future__ import annotations

from pydmq.protocol.errors import ErrorCode

__all__ = ["ControllerError", "ControllerTimeoutError", "NotControllerError"]


class ControllerError(Exception):
    """An operation could not run or finish; ``error_code`` is what the client gets, with
    ``message``."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class NotControllerError(ControllerError):
    """This node is not (or no longer) the active controller."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_CONTROLLER, message)


class ControllerTimeoutError(ControllerError):
    """The operation's records did not commit in time (no quorum?)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)
