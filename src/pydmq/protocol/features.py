"""The feature levels this node supports, as ApiVersions (v3+) advertises them.

Read by the broker's and the controller's ApiVersions handlers and by the controller when it
writes the first ``FeatureLevelRecord`` of a new cluster.
"""

from __future__ import annotations

from typing import Final

__all__ = ["METADATA_VERSION"]

# metadata.version levels: 3.3-IV3 = 7 ... 4.0-IV3 = 25; we behave like 4.0.
METADATA_VERSION: Final = 25
