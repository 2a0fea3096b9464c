"""The ``transactions`` marker: the pydmq variants of the transaction proofs.

Every test here is parametrized over its target (:mod:`.targets`): ``kafka`` (the reference
Apache Kafka 4.4) always runs; ``pydmq`` and ``pydmq-cluster`` carry the ``transactions``
marker and are deselected unless the ``-m`` expression names that marker, e.g.::

    ./scripts/test tests/interop/transactions -m transactions           # pydmq only
    ./scripts/test tests/interop/transactions -m "transactions or not transactions"

They fail on a pydmq without transactions (issue 18), so the default run (and CI) leaves them
out until the transaction coordinator, the transactional log and the group side are merged.
"""

from __future__ import annotations

import pytest

MARKER = "transactions"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if MARKER in (config.option.markexpr or ""):
        return
    kept = [item for item in items if item.get_closest_marker(MARKER) is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(
            items=[item for item in items if item.get_closest_marker(MARKER) is not None]
        )
        items[:] = kept
