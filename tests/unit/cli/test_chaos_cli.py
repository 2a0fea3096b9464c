"""``pydmq chaos`` without its dependencies names the ``chaos`` extra, not the test extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[3]

# Runs `pydmq chaos` in a child where importing confluent_kafka fails as if not installed, and
# where starting a process fails (nothing is launched if the command does not stop first).
CHILD = textwrap.dedent(
    """
    import subprocess
    import sys

    def refuse(*args, **kwargs):
        raise RuntimeError("this test starts no process")

    subprocess.Popen = refuse

    class Missing:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "confluent_kafka":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Missing())
    from pydmq.cli import main

    sys.exit(main(["chaos", "--duration", "1", "--data-dir", sys.argv[1]]))
    """
)


def test_missing_dependencies_name_the_chaos_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "chaos")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pydmq chaos needs confluent_kafka" in done.stderr
    assert "pip install 'pydmq[chaos]'" in done.stderr
    assert "[test]" not in done.stderr


def test_the_chaos_extra_installs_what_the_harness_imports() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chaos = project["optional-dependencies"]["chaos"]
    assert any(req.startswith("confluent-kafka") for req in chaos), chaos
