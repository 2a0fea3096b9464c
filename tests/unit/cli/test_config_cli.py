"""``pydmq config list``: the supported broker and topic properties with their defaults, and
the Kafka properties accepted without effect."""

from __future__ import annotations

import pytest

from pydmq.cli import main


def test_config_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "list", "retention.hours"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "DEFAULT", "DESCRIPTION"]
    assert out[1].split()[:2] == ["log.retention.hours", "168"]

    assert main(["config", "list", "--topic", "retention.ms"]) == 0
    rows = {line.split()[0]: line.split()[1:3] for line in capsys.readouterr().out.splitlines()}
    assert rows["retention.ms"] == ["604800000", "log.retention.ms"]

    assert main(["config", "list", "--kafka-only", "num.io"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# thread and pool sizes") and out[1:] == ["num.io.threads"]

    assert main(["config", "list", "no-such-property"]) == 1
    assert "no property name contains 'no-such-property'" in capsys.readouterr().err
