"""A new cluster formatted at ``transaction.version`` 2 (KIP-890 part 2, Kafka 4.x's default;
``pydmq.bootstrap.transaction.version=2``): its active controller commits the level, and
every broker, broker-only ones included, learns it from the controller's ApiVersions and
reports it to clients, so Kafka 4.x clients use transactions v2 whichever broker they ask."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pydmq.protocol.messages.api_versions import ApiVersionsRequest

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(60)

API_VERSIONS = ApiVersionsRequest(client_software_name="pydmq-test", client_software_version="1.0")


def test_every_broker_reports_the_finalized_transaction_version(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, 3, broker_only=1, **{"pydmq_bootstrap_transaction_version": 2})
        await cluster.start()
        try:

            async def finalized(index: int) -> dict[str, int]:
                response = await cluster.client(index).request(18, 4, API_VERSIONS)
                return {f.name: f.max_version_level for f in response.finalized_features}

            for index in range(4):

                async def reported(index: int = index) -> bool:
                    return (await finalized(index)).get("transaction.version") == 2

                await wait_until(reported, timeout=20)
            response = await cluster.client(3).request(18, 4, API_VERSIONS)
            supported = {
                f.name: (f.min_version, f.max_version) for f in response.supported_features
            }
            assert supported["transaction.version"] == (0, 2)
            assert response.finalized_features_epoch >= 0
        finally:
            await cluster.stop()

    asyncio.run(scenario())
