"""A single node does not import the cluster code (start-up time of ``pydmq serve``).

Of the cluster packages it imports only what its local controller needs at start: the
metadata records, image, delta and bulk codec, the Raft log files (not the Raft core), the local metadata
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
    from pydmq.broker.server import Broker
    from pydmq.config.broker import BrokerConfig

    Broker(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1]}))
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
