"""benchmarks/common.py's per-tree child environment for the A/B benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.common import tree_env


def test_a_tree_brings_its_own_sqlite_plugin_after_its_source(tmp_path: Path) -> None:
    src = tmp_path / "tree" / "src"
    plugin = tmp_path / "tree" / "plugins" / "pydmq-sqlite" / "src"
    src.mkdir(parents=True)
    plugin.mkdir(parents=True)
    path = tree_env(str(src))["PYTHONPATH"].split(os.pathsep)
    assert path[:2] == [str(src), str(plugin)]


def test_a_tree_without_the_plugin_puts_only_its_source_first(tmp_path: Path) -> None:
    src = tmp_path / "tree" / "src"
    src.mkdir(parents=True)
    path = tree_env(str(src))["PYTHONPATH"].split(os.pathsep)
    assert path[0] == str(src)
    assert not any("pydmq-sqlite" in entry and str(tmp_path) in entry for entry in path)
