"""Asynchronous handlers (acks=all Produce, long-poll Fetch, cluster Metadata) in the dispatcher.

The dispatcher hands the connection a future for the encoded answer. The handler's coroutine
must run as the task itself: when the connection closes or the broker stops before it ran,
cancelling the answer cancels the handler, and no coroutine is left "never awaited".
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

import pytest

from pydmq.api.dispatcher import RequestDispatcher
from pydmq.api.handler import RequestContext
from pydmq.net.connection import KafkaConnection
from pydmq.protocol.messages.api_versions import ApiVersionsResponse
from pydmq.protocol.messages.metadata import MetadataResponse

# (queued, started, local done): a request's timing so far, as the dispatcher passes it
_TIMING = (0.0, 0.0, 0.0)
# Unthrottled answers never touch the connection.
_CONNECTION = KafkaConnection(lambda frame, connection: None, 1024, "PLAINTEXT")


def _context(api_key: int = 3, api_version: int = 12) -> RequestContext[None]:
    return RequestContext(
        broker=None,
        api_key=api_key,
        api_version=api_version,
        correlation_id=7,
        client_id="test",
        client_host="127.0.0.1",
        client_port=1,
        listener="PLAINTEXT",
        connection_id=1,
    )


def test_cancelling_before_the_handler_ran_leaves_no_unawaited_coroutine() -> None:
    finished: list[bool] = []

    async def handler() -> None:
        await asyncio.sleep(10)
        finished.append(True)

    async def scenario() -> bool:
        answer = asyncio.ensure_future(  # what the connection does
            RequestDispatcher(None, {}, ApiVersionsResponse)._finish_later(
                _context(), handler(), _CONNECTION, _TIMING
            )
        )
        answer.cancel()  # the connection closed in the same loop tick
        for _ in range(3):
            await asyncio.sleep(0)
        return answer.cancelled()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cancelled = asyncio.run(scenario())
        gc.collect()  # an unstarted coroutine warns when it is freed
    assert cancelled
    assert finished == []
    never_awaited = [w for w in caught if "never awaited" in str(w.message)]
    assert never_awaited == []


def test_cancelling_the_answer_cancels_a_running_handler() -> None:
    cancelled: list[bool] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def scenario() -> None:
        answer = asyncio.ensure_future(  # what the connection does
            RequestDispatcher(None, {}, ApiVersionsResponse)._finish_later(
                _context(), handler(), _CONNECTION, _TIMING
            )
        )
        await asyncio.sleep(0.01)  # the handler is parked
        answer.cancel()
        await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert cancelled == [True]


def test_the_answer_is_the_encoded_response_with_its_correlation_id() -> None:
    async def handler() -> MetadataResponse:
        await asyncio.sleep(0)
        return MetadataResponse(cluster_id="c", controller_id=1)

    async def scenario() -> Any:
        return await RequestDispatcher(None, {}, ApiVersionsResponse)._finish_later(
            _context(), handler(), _CONNECTION, _TIMING
        )

    buffers = asyncio.run(scenario())
    frame = b"".join(bytes(b) for b in buffers)
    size = int.from_bytes(frame[:4], "big")
    assert size == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 7  # correlation id


def test_a_failing_handler_fails_the_answer() -> None:
    async def handler() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    async def scenario() -> Any:
        return await RequestDispatcher(None, {}, ApiVersionsResponse)._finish_later(
            _context(), handler(), _CONNECTION, _TIMING
        )

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(scenario())


def test_a_handler_answering_none_sends_nothing() -> None:
    async def handler() -> None:
        await asyncio.sleep(0)

    async def scenario() -> Any:
        return await RequestDispatcher(None, {}, ApiVersionsResponse)._finish_later(
            _context(0, 9), handler(), _CONNECTION, _TIMING
        )

    assert asyncio.run(scenario()) is None
