"""``python -m pydmq.protocol.codegen [OUT_DIR]``: regenerate the message codecs."""

from __future__ import annotations

import sys
from pathlib import Path

from pydmq.protocol.codegen import MESSAGES_DIR, generate


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else MESSAGES_DIR
    paths = generate(out)
    print(f"wrote {len(paths)} modules to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
