"""Fixtures shared by the unit tests."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from pydmq import failpoints


@pytest.fixture
def arm_failpoints(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Arm a failpoint spec in this process (``""`` disarms).

    Each pydmq module binds ``failpoint`` at import (a no-op unless the environment armed
    some), so the spec's function replaces that binding in every loaded pydmq module for the
    duration of the test.
    """

    def arm(spec: str) -> None:
        active = failpoints.make_failpoint(spec)
        for name, module in list(sys.modules.items()):
            if (
                name.startswith("pydmq.")
                and module is not failpoints
                and callable(getattr(module, "failpoint", None))
            ):
                monkeypatch.setattr(module, "failpoint", active)

    return arm
