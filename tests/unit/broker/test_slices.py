"""in_slices: small work is answered at once; large work gives the loop back between slices."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pydmq.broker.handlers._slices import SLICE_ELEMENTS, in_slices

pytestmark = pytest.mark.timeout(30)


def test_in_slices_answers_small_work_at_once() -> None:
    def steps() -> Iterator[int]:
        yield from [1] * (SLICE_ELEMENTS - 1)

    assert in_slices(steps(), lambda: "done") == "done"


def test_in_slices_lets_others_run_between_slices() -> None:
    order: list[str] = []

    def steps() -> Iterator[int]:
        for i in range(3 * SLICE_ELEMENTS):
            if i == 2 * SLICE_ELEMENTS:
                order.append("third slice")
            yield 1

    async def scenario() -> str:
        pending = in_slices(steps(), lambda: "done")
        assert asyncio.iscoroutine(pending)
        asyncio.get_running_loop().call_soon(order.append, "other work")
        result: str = await pending
        return result

    assert asyncio.run(scenario()) == "done"
    assert order == ["other work", "third slice"]
