"""A single node does not import the cluster code (start-up time of ``pydmq serve``).

Of the cluster packages it imports only what its local controller needs at start: the
metadata records, image, delta and bulk codec, the bootstrap feature levels, the Raft log files (not the Raft core), the local metadata
log, the local controller and the controller's error type (not the controller's operations
nor its admin handlers: imported on the first admin request).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent(
    """
    import json, sys
    from pydmq.config.broker import BrokerConfig
    from pydmq.node import Node

    Node(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "pydmq.http.listeners": "http://127.0.0.1:0", "log.dirs": sys.argv[1]}))
    prefixes = ("pydmq.broker.cluster", "pydmq.controller", "pydmq.raft", "pydmq.metadata")
    print(json.dumps(sorted(m for m in sys.modules if m.startswith(prefixes))))
    """
)

LOCAL_METADATA_LOG = [
    "pydmq.controller",
    "pydmq.controller.errors",
    "pydmq.controller.local",
    "pydmq.controller.local_log",
    "pydmq.metadata",
    "pydmq.metadata.delta",
    "pydmq.metadata.features",
    "pydmq.metadata.generated_records",
    "pydmq.metadata.image",
    "pydmq.metadata.image_codec",
    "pydmq.metadata.records",
    "pydmq.raft",
    "pydmq.raft.file_log",
    "pydmq.raft.log",
]


def test_a_single_node_broker_imports_only_its_local_metadata_log(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == LOCAL_METADATA_LOG


FIRST_ADMIN_REQUEST = textwrap.dedent(
    """
    import asyncio, json, sys
    from pydmq.api.handler import RequestContext
    from pydmq.broker.handlers import create_topics
    from pydmq.config.broker import BrokerConfig
    from pydmq.node import Node
    from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest

    broker = Node(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "pydmq.http.listeners": "http://127.0.0.1:0", "log.dirs": sys.argv[1]}))
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=1)], timeout=1000
    )
    ctx = RequestContext(broker.broker.services, 19, 7, 1, "test", "127.0.0.1", 1, "PLAINTEXT", 1)
    response = asyncio.run(create_topics.handle(ctx, request))
    assert response.topics[0].error_code == 0, response
    prefixes = ("pydmq.controller", "pydmq.raft")
    print(json.dumps(sorted(m for m in sys.modules if m.startswith(prefixes))))
    """
)


def test_the_first_admin_request_imports_the_admin_handlers_only(tmp_path: Path) -> None:
    """A single node's first admin request imports the controller's operations and its admin
    handlers, in process; not the Raft core nor the controller listener's other handlers."""
    out = subprocess.run(
        [sys.executable, "-c", FIRST_ADMIN_REQUEST, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    imported = set(json.loads(out.stdout.splitlines()[-1]))
    assert {"pydmq.controller.operations", "pydmq.controller.handlers.admin"} <= imported
    assert "pydmq.controller.handlers.create_topics" in imported
    assert (
        not {
            "pydmq.controller.handlers.listener",
            "pydmq.controller.handlers.raft",
            "pydmq.controller.runtime",
            "pydmq.raft.core",
        }
        & imported
    )


STARTED_NODE = textwrap.dedent(
    """
    import asyncio, json, sys
    from pydmq.config.broker import BrokerConfig
    from pydmq.node import Node

    async def main() -> None:
        config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "pydmq.http.listeners": "http://127.0.0.1:0", "log.dirs": sys.argv[1]})
        node = Node(config)
        await node.start()
        await node.stop()

    asyncio.run(main())
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "cramjam")))
    """
)


def test_a_started_node_does_not_load_the_compression_codecs(tmp_path: Path) -> None:
    """The codecs (cramjam, a native library) load with the first compressed batch a node
    decodes or the cleaner rewrites, not at start (the log cleaner starts with the node)."""
    out = subprocess.run(
        [sys.executable, "-c", STARTED_NODE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == []
