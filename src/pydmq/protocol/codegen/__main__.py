"""``python -m pydmq.protocol.codegen [SOURCE_ROOT]``: regenerate the message and record
codecs, in place or below another directory laid out as ``src``."""

from __future__ import annotations

import sys
from pathlib import Path

from pydmq.protocol.codegen import SOURCE_ROOT, generate_all


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else SOURCE_ROOT
    paths = generate_all(out)
    print(f"wrote {len(paths)} modules below {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
