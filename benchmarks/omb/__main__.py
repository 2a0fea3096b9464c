"""``python -m benchmarks.omb``: see :mod:`benchmarks.omb.runner`."""

from __future__ import annotations

import sys

from benchmarks.omb.runner import main

if __name__ == "__main__":  # spawned load generators import this module too: no side effects
    sys.exit(main())
