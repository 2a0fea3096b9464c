"""Generator of the message codecs in :mod:`pydmq.protocol.messages` and of the codecs of the
records pydmq stores (``__consumer_offsets``, ``__cluster_metadata``).

Run ``python -m pydmq.protocol.codegen`` to regenerate the committed modules in place.
kio is imported here only (generation time), never by the runtime codecs. Record codecs come
from our own schemas, ``schemas/records/*.json`` (see :mod:`.record_model`), one module each.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["MESSAGES_DIR", "SOURCE_ROOT", "generate", "generate_all", "generate_records"]

MESSAGES_DIR = Path(__file__).resolve().parent.parent / "messages"
SOURCE_ROOT = Path(__file__).resolve().parents[3]
"""The directory holding the ``pydmq`` package (``src``)."""


def _format(files: list[Path]) -> None:
    ruff = Path(sys.executable).with_name("ruff")
    cmd = [str(ruff)] if ruff.exists() else [shutil.which("ruff") or "ruff"]
    config = Path(__file__).resolve().parents[4] / "pyproject.toml"
    extra = ["--config", str(config)] if config.exists() else []
    names = list(map(str, files))
    subprocess.run(
        [*cmd, "check", "--quiet", "--fix", "--select", "I001,RUF023", *extra, *names], check=True
    )
    subprocess.run([*cmd, "format", "--quiet", *extra, *names], check=True)


def generate(out_dir: Path = MESSAGES_DIR) -> list[Path]:
    """Write every message module plus ``__init__.py`` into ``out_dir``; return the paths."""
    from importlib.metadata import version

    from pydmq.protocol.codegen.emit import emit_init, emit_module
    from pydmq.protocol.codegen.model import build_all

    kio_version = version("kio")
    apis = build_all()
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for api in apis:
        path = out_dir / f"{api.name}.py"
        path.write_text(emit_module(api, kio_version))
        written.append(path)
    init = out_dir / "__init__.py"
    init.write_text(emit_init(apis, kio_version))
    written.append(init)
    _format(written)
    return written


def generate_records(source_root: Path = SOURCE_ROOT) -> list[Path]:
    """Write one module per record schema file below ``source_root``; return the paths."""
    from pydmq.protocol.codegen.record_emit import emit_family, module_path
    from pydmq.protocol.codegen.record_model import load_families

    written: list[Path] = []
    for family in load_families():
        path = source_root / module_path(family)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(emit_family(family))
        written.append(path)
    _format(written)
    return written


def generate_all(source_root: Path = SOURCE_ROOT) -> list[Path]:
    """Messages and records, below ``source_root`` as in the package."""
    messages = source_root / MESSAGES_DIR.relative_to(SOURCE_ROOT)
    return generate(messages) + generate_records(source_root)
