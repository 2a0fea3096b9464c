"""The committed generated modules must equal a fresh generator run, byte for byte."""

from __future__ import annotations

from pathlib import Path

from pydmq.protocol.codegen import MESSAGES_DIR, generate


def test_regeneration_matches_committed(tmp_path: Path) -> None:
    written = generate(tmp_path)
    fresh = {p.name for p in written}
    committed = {p.name for p in MESSAGES_DIR.glob("*.py")}
    assert fresh == committed
    for name in sorted(fresh):
        assert (tmp_path / name).read_bytes() == (MESSAGES_DIR / name).read_bytes(), name
