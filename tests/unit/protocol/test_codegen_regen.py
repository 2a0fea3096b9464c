"""The committed generated modules must equal a fresh generator run, byte for byte."""

from __future__ import annotations

from pathlib import Path

from pydmq.protocol.codegen import MESSAGES_DIR, SOURCE_ROOT, generate, generate_records


def test_regeneration_matches_committed(tmp_path: Path) -> None:
    written = generate(tmp_path)
    fresh = {p.name for p in written}
    committed = {p.name for p in MESSAGES_DIR.glob("*.py")}
    assert fresh == committed
    for name in sorted(fresh):
        assert (tmp_path / name).read_bytes() == (MESSAGES_DIR / name).read_bytes(), name


def test_record_regeneration_matches_committed(tmp_path: Path) -> None:
    written = generate_records(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in written)
    assert [str(p) for p in fresh] == [
        "pydmq/groups/consumer/generated_records.py",
        "pydmq/groups/generated_records.py",
        "pydmq/metadata/generated_records.py",
        "pydmq/shares/generated_records.py",
        "pydmq/transactions/generated_records.py",
    ]
    for rel in fresh:
        assert (tmp_path / rel).read_bytes() == (SOURCE_ROOT / rel).read_bytes(), rel
