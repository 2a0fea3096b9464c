"""Coverage-guided fuzzing of the decoders with atheris (libFuzzer). Not run in CI.

Install atheris into the venv (``pip install atheris``), then, from the repository root::

    .venv/bin/python tests/fuzz/atheris_decoders.py request_frame \\
        -artifact_prefix=tests/fuzz/corpus/request_frame/ -max_total_time=600 \\
        -rss_limit_mb=2048 -timeout=5 tests/fuzz/corpus/request_frame

Targets: request_body, request_frame, record_batch, record_batch_crc_fixed, decompress (see
``fuzz_harness.py``). A crash (any exception outside the target's allowed errors, a timeout or
an RSS overrun) is written by libFuzzer under ``-artifact_prefix``; rename it to something
descriptive and keep it in ``corpus/<target>/``: ``test_fuzz_corpus.py`` replays it forever.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports():
    import fuzz_harness


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in fuzz_harness.TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(fuzz_harness.TARGETS)}}} [libFuzzer args]")
    target = sys.argv.pop(1)

    def one_input(data: bytes) -> None:
        fuzz_harness.run(target, data)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
