"""The README works when pasted command by command: every ``sh`` block runs, in order, in a
fresh copy of the repository (its ``git ls-files``), exactly as written.

- A server command (``pydmq serve``, ``pydmq cluster up``, with whatever precedes it on its
  line, e.g. the install) runs as a reader would run it in a terminal of its own: a fresh
  ``bash -c`` in the repository directory, in its own process group. The test waits until
  its client port listens and, before the next client command, until its cluster lists all
  its brokers.
- Every other command runs in one bash session (the reader's second terminal, where
  ``. .venv/bin/activate`` persists) and must exit 0. A ``text`` block after an ``sh`` block
  (with only prose between) is what that block prints: its commands' stdout must equal it.
- ``<!-- tests/interop/test_readme.py: Ctrl-C the servers started above -->`` before a block
  stops the running servers as Ctrl-C would (SIGINT to each process group).
  ``<!-- not run by tests/interop/test_readme.py: REASON -->`` before a block skips it; no
  block is skipped without one, and any other comment naming this test is an error.

The fresh shells get the environment of this test minus its virtualenv and PYTHONPATH, so
``pydmq`` is only found once the README has installed and activated it. The README's fixed
ports (9092-9094, 19092-19094, HTTP 8082-8084) must be free, else the test skips. Every process it started
is killed by process group at the end, whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pytest

from pydmq.client import KafkaClient, KafkaError
from pydmq.cluster_process import is_listening

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
README_PORTS = (9092, 9093, 9094, 19092, 19093, 19094, 8082, 8083, 8084)
INSTALL_TIMEOUT_S = 600.0  # the first server command creates the venv and pip-installs
SERVER_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0

_SKIP = re.compile(r"^not run by tests/interop/test_readme\.py: (?P<reason>\S.*)$")
_STOP = "tests/interop/test_readme.py: Ctrl-C the servers started above"
_SERVER = re.compile(r"(?:^|&&|;)\s*(?:\S*/)?pydmq\s+(?:serve|cluster\s+up)\b(?!.*--help)")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(?P<word>\w+)\1")


# -- the README -----------------------------------------------------------------------------------


@dataclass
class Command:
    line: int
    text: str

    @property
    def is_server(self) -> bool:
        return bool(_SERVER.search(self.text))


@dataclass
class Block:
    line: int
    commands: list[Command]
    skip_reason: str | None = None
    stop_before: bool = False
    expected: str | None = None


def _commands(lines: list[str], first_line: int) -> list[Command]:
    """Logical commands: backslash continuations joined, here-documents included."""
    out: list[Command] = []
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text += "\n" + lines[i]
        heredoc = _HEREDOC.search(text)
        if heredoc is not None:
            while i + 1 < len(lines) and lines[i].strip() != heredoc["word"]:
                i += 1
                text += "\n" + lines[i]
        i += 1
        if text.strip() and not text.lstrip().startswith("#"):
            out.append(Command(first_line + start, text))
    return out


def parse_readme(text: str) -> list[Block]:
    """The ``sh`` blocks in order, with their markers and expected output."""
    blocks: list[Block] = []
    lines = text.splitlines()
    skip: str | None = None
    stop = False
    last_sh: Block | None = None
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        comment = re.fullmatch(r"<!--\s*(.*?)\s*-->", line)
        if comment is not None and "test_readme" in comment[1]:
            found = _SKIP.match(comment[1])
            if found is not None:
                skip = found["reason"]
            elif comment[1] == _STOP:
                stop = True
            else:
                raise ValueError(f"README line {i + 1}: marker not understood: {line}")
        if line.startswith("```"):
            kind = line[3:].strip()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            body = lines[i + 1 : end]
            if kind == "sh":
                last_sh = Block(i + 1, _commands(body, i + 2), skip, stop)
                blocks.append(last_sh)
                skip, stop = None, False
            elif kind == "text" and last_sh is not None:
                last_sh.expected = "\n".join(body)
            else:
                last_sh = None
            if skip is not None or stop:
                raise ValueError(f"README line {i + 1}: a marker precedes a {kind!r} block")
            i = end
        i += 1
    return blocks


def _normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


# -- processes ------------------------------------------------------------------------------------


def fresh_env() -> dict[str, str]:
    """This test's environment as a new terminal would have it: no virtualenv of ours, no
    PYTHONPATH, no pydmq settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONUNBUFFERED")
        and not k.startswith(("PYDMQ_", "PYTEST_"))
    }
    own = Path(sys.prefix).resolve() if sys.prefix != sys.base_prefix else None
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    if own is not None:
        parts = [p for p in parts if not Path(p).resolve().is_relative_to(own)]
    env["PATH"] = os.pathsep.join(parts)
    return env


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass
class Server:
    """A README server command in its own fresh shell and process group (its terminal)."""

    command: Command
    bootstrap: str
    brokers: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    ready: bool = False
    started: float = field(default_factory=time.monotonic)

    def start(self, cwd: Path, env: dict[str, str]) -> None:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                ["bash", "-c", self.command.text],
                cwd=cwd,
                env={**env, "PYTHONUNBUFFERED": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.started = time.monotonic()

    @property
    def pgid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def log_tail(self, size: int = 3000) -> str:
        return self.log_path.read_bytes()[-size:].decode(errors="replace")

    def check_alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            pytest.fail(
                f"README line {self.command.line}: the server exited with "
                f"{self.process.returncode}:\n{self.log_tail()}"
            )

    def wait_listening(self, timeout: float) -> float:
        host, _, port = self.bootstrap.rpartition(":")
        deadline = time.monotonic() + timeout
        while not is_listening(host, int(port)):
            self.check_alive()
            if time.monotonic() > deadline:
                pytest.fail(f"README line {self.command.line}: {self.bootstrap} not listening")
            time.sleep(0.1)
        return time.monotonic() - self.started

    def wait_ready(self, timeout: float) -> None:
        """Until Metadata lists all the brokers of its cluster (they have registered)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while not self.ready:
            self.check_alive()
            with (
                contextlib.suppress(KafkaError, OSError),
                KafkaClient(self.bootstrap, timeout=2.0) as client,
            ):
                client.refresh_metadata([])
                seen = len(client.brokers)
                self.ready = seen >= self.brokers
            if not self.ready:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"README line {self.command.line}: {seen} of {self.brokers} brokers "
                        f"after {timeout:g} s:\n{self.log_tail()}"
                    )
                time.sleep(0.2)

    def interrupt(self, timeout: float) -> None:
        """Ctrl-C: SIGINT to its process group; SIGKILL if it has not exited in time."""
        assert self.process is not None
        self.check_alive()
        _kill_group(self.pgid, signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(self.pgid, signal.SIGKILL)
            self.process.wait(10)
            pytest.fail(f"README line {self.command.line}: no exit {timeout:g} s after Ctrl-C")
        _kill_group(self.pgid, signal.SIGKILL)  # whatever it left behind in its group

    def kill(self) -> None:
        if self.process is not None:
            _kill_group(self.pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)


def server_target(command: Command, cwd: Path) -> tuple[str, int]:
    """(bootstrap address, broker count of its cluster), read with pydmq's own parsers."""
    import argparse

    from pydmq.cli import cluster, serve
    from pydmq.cluster_process import plan_nodes
    from pydmq.config.broker import BrokerConfig

    words = shlex.split(command.text.replace("\\\n", " "), comments=True)
    last = words[max((i for i, w in enumerate(words) if w in ("&&", "||", ";")), default=-1) + 1 :]
    argv = last[next(i for i, w in enumerate(last) if w.endswith("pydmq")) + 1 :]
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    serve.add_parser(sub)
    cluster.add_parser(sub)
    args = parser.parse_args(argv)
    if argv[0] == "cluster":
        specs = plan_nodes(
            args.nodes,
            cwd / args.data_dir,
            host=args.host,
            base_port=args.base_port,
            controller_base_port=args.controller_base_port,
        )
        return specs[0].bootstrap, len(specs)
    if args.config is not None:
        args.config = cwd / args.config
    config: BrokerConfig = serve.build_config(args)
    controllers = set(config.controller_listener_names) if config.is_cluster_mode else set()
    listener = next(
        uri for uri in config.advertised_listeners if uri.split("://")[0] not in controllers
    )
    address = listener.split("://", 1)[1]
    return address, max(1, len(config.controller_quorum_voters))


class Shell:
    """One bash session fed one command at a time (the reader's second terminal)."""

    def __init__(self, cwd: Path, env: dict[str, str], out_dir: Path) -> None:
        self.out_dir = out_dir
        self.count = 0
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._buffer = b""

    def __enter__(self) -> Shell:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _kill_group(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def run(self, command: Command, timeout: float) -> tuple[int, str, str]:
        """Run one command; returns (exit status, stdout, stderr)."""
        self.count += 1
        out = self.out_dir / f"{self.count:03d}.out"
        err = self.out_dir / f"{self.count:03d}.err"
        sentinel = f"__test_readme_status_{self.count}__"
        script = (
            f"{{ {command.text}\n}} >{shlex.quote(str(out))} 2>{shlex.quote(str(err))} "
            f"</dev/null\nprintf '\\n{sentinel} %s\\n' \"$?\"\n"
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(script.encode())
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        pattern = re.compile(rf"{sentinel} (\d+)\n".encode())
        while (found := pattern.search(self._buffer)) is None:
            left = deadline - time.monotonic()
            if left <= 0 or self.process.poll() is not None:
                pytest.fail(
                    f"README line {command.line}: no end after {timeout:g} s "
                    f"(or the shell exited): {command.text}"
                )
            ready, _, _ = select.select([self.process.stdout], [], [], min(left, 1.0))
            if ready:
                self._buffer += os.read(self.process.stdout.fileno(), 65536)
        self._buffer = self._buffer[found.end() :]
        return int(found[1]), out.read_text(errors="replace"), err.read_text(errors="replace")


def copy_repository(destination: Path) -> None:
    """The files git tracks, as they are in the working tree (not the ignored ones)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


# -- the test -------------------------------------------------------------------------------------


def test_parse_readme_markers() -> None:
    """The parser this test relies on: markers, commands, expected output."""
    blocks = parse_readme(
        "intro\n"
        "<!-- not run by tests/interop/test_readme.py: too slow -->\n"
        "```sh\nslow-thing\n```\n"
        "```sh\n.venv/bin/pydmq serve --log-dirs x \\\n  -o a=b   # a server\n"
        "# a comment\ncat > f <<'EOF'\nx=1\nEOF\npydmq topics list\n```\n"
        "It prints:\n```text\nevents\n```\n"
        "<!-- tests/interop/test_readme.py: Ctrl-C the servers started above -->\n"
        "```sh\npydmq serve --help\n```\n"
    )
    assert [b.skip_reason for b in blocks] == ["too slow", None, None]
    assert [b.stop_before for b in blocks] == [False, False, True]
    second = blocks[1]
    assert [c.line for c in second.commands] == [7, 10, 13]
    assert [c.is_server for c in second.commands] == [True, False, False]
    assert second.commands[1].text == "cat > f <<'EOF'\nx=1\nEOF"
    assert second.expected == "events"
    assert not blocks[2].commands[0].is_server
    with pytest.raises(ValueError, match="marker not understood"):
        parse_readme("<!-- test_readme: skip -->\n```sh\nx\n```\n")


def test_readme_commands_work_in_order(tmp_path: Path) -> None:
    if shutil.which("bash") is None or shutil.which("git") is None:
        pytest.skip("needs bash and git")
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the README is run in a copy of `git ls-files`")
    busy = [p for p in README_PORTS if is_listening("127.0.0.1", p)]
    if busy:
        pytest.skip(f"the README's fixed ports are in use here: {busy}")
    env = fresh_env()
    if shutil.which("python3", path=env["PATH"]) is None:
        pytest.skip("no python3 on PATH outside this test's virtualenv")
    blocks = parse_readme((REPO / "README.md").read_text(encoding="utf-8"))
    repo = tmp_path / "pydmq"
    copy_repository(repo)
    outputs = tmp_path / "outputs"
    outputs.mkdir()

    servers: list[Server] = []
    running: list[Server] = []
    starting: list[tuple[Server, str, float]] = []  # started, not yet seen listening
    timings: list[tuple[int, str, float]] = []
    try:
        with Shell(repo, env, outputs) as shell:
            for block in blocks:
                if block.skip_reason is not None:
                    print(f"README line {block.line}: not run: {block.skip_reason}")
                    continue
                if block.stop_before:
                    for server, text, limit in starting:
                        timings.append((server.command.line, text, server.wait_listening(limit)))
                    starting.clear()
                    for server in running:
                        server.interrupt(STOP_TIMEOUT_S)
                    running.clear()
                printed: list[str] = []
                for command in block.commands:
                    first_line = command.text.splitlines()[0]
                    if command.is_server:
                        bootstrap, brokers = server_target(command, repo)
                        server = Server(
                            command, bootstrap, brokers, tmp_path / f"server-{command.line}.log"
                        )
                        servers.append(server)
                        server.start(repo, env)
                        running.append(server)
                        limit = INSTALL_TIMEOUT_S if len(servers) == 1 else SERVER_TIMEOUT_S
                        # A cluster node opens its client port only once the cluster is ready
                        # (its peers started too): waited for before the next client command.
                        starting.append((server, first_line, limit))
                        continue
                    for server, text, limit in starting:
                        timings.append((server.command.line, text, server.wait_listening(limit)))
                    starting.clear()
                    for server in running:
                        server.wait_ready(SERVER_TIMEOUT_S)
                    started = time.monotonic()
                    status, out, err = shell.run(command, COMMAND_TIMEOUT_S)
                    timings.append((command.line, first_line, time.monotonic() - started))
                    assert status == 0, (
                        f"README line {command.line} exited with {status}: {command.text}\n"
                        f"stdout:\n{out}\nstderr:\n{err}"
                    )
                    printed.append(out)
                if block.expected is not None:
                    assert _normalized("".join(printed)) == _normalized(block.expected), (
                        f"README line {block.line}: the block printed something else"
                    )
            for server, text, limit in starting:
                timings.append((server.command.line, text, server.wait_listening(limit)))
            for server in running:
                server.check_alive()
    finally:
        for server in servers:
            server.kill()
        print("README commands (line, seconds; servers: until listening):")
        for line, text, seconds in timings:
            print(f"  {line:4d}  {seconds:7.2f}  {text[:90]}")
