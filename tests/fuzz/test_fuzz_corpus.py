"""Replay ``corpus/<target>/*``: every input that ever crashed a target, kept as a regression.

Add a file by saving the failing input (Hypothesis prints it; atheris writes ``crash-*`` files
with ``-artifact_prefix=tests/fuzz/corpus/<target>/``) into the target's directory. The seed
files (``seed-*``) are valid inputs that give the fuzzers a starting point.
"""

from __future__ import annotations

import tracemalloc

import pytest
from fuzz_harness import CORPUS, TARGETS, Budget, corpus_files

CASES = [(target, path) for target in sorted(TARGETS) for path in corpus_files(target)]


def test_corpus_directories_exist() -> None:
    for target in TARGETS:
        assert (CORPUS / target).is_dir(), f"missing corpus directory for {target}"


@pytest.mark.parametrize(("target", "path"), CASES, ids=[f"{t}/{p.name}" for t, p in CASES])
def test_corpus_input(target: str, path) -> None:  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        Budget(trace=True).check(target, path.read_bytes())
    finally:
        tracemalloc.stop()
