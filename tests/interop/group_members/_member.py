"""Shared by the member scripts: command line, event file, throttle.

Every member (ck_member.py, kp_member.py, aio_member.py and InteropClient group-consume)
takes the same options and writes the same JSON lines, one per event:

    {"e": "a"|"r"|"l", "g": GEN, "p": [partitions], "t": MS}   rebalance callback
    {"e": "m", "p": P, "o": OFFSET, "v": "<value>", "g": GEN, "t": MS}   a record
    {"e": "c"|"cf", "g": GEN, "t": MS}                          commit ok / failed
    {"e": "closed", "t": MS}

Records are written and flushed before they are committed, so a committed offset was always
reported first (SIGKILL loses nothing that was committed).
"""

from __future__ import annotations

import argparse
import json
import os
import time


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--strategy", default="range")
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--instance-id")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--stop-file")
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--prop", action="append", default=[])
    return ap.parse_args()


def props(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    for kv in args.prop:
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Events:
    def __init__(self, path: str) -> None:
        self._f = open(path, "a", buffering=1 << 16)  # noqa: SIM115 - closed by close()

    def rebalance(self, kind: str, gen: int, parts: object) -> None:
        self._f.write(
            json.dumps({"e": kind, "g": gen, "p": sorted(parts), "t": now_ms()}) + "\n"  # type: ignore[call-overload]
        )
        self._f.flush()

    def records(self, recs: list[tuple[int, int, bytes | None]], gen: int) -> None:
        t = now_ms()
        self._f.write(
            "".join(
                f'{{"e":"m","p":{p},"o":{o},"v":{json.dumps(None if v is None else v.decode())},'
                f'"g":{gen},"t":{t}}}\n'
                for p, o, v in recs
            )
        )
        self._f.flush()

    def commit(self, gen: int, error: BaseException | None = None) -> None:
        d: dict[str, object] = {"e": "c" if error is None else "cf", "g": gen, "t": now_ms()}
        if error is not None:
            d["err"] = repr(error)[:200]
        self._f.write(json.dumps(d) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.write(json.dumps({"e": "closed", "t": now_ms()}) + "\n")
        self._f.close()


class Run:
    """Deadline, stop file and the records/s cap."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline = time.monotonic() + args.max_seconds

    def go_on(self) -> bool:
        if time.monotonic() >= self.deadline:
            return False
        return not (self.args.stop_file and os.path.exists(self.args.stop_file))

    def pause_for(self, n: int, started: float) -> float:
        if self.args.rate <= 0 or n == 0:
            return 0.0
        return max(0.0, n / self.args.rate - (time.monotonic() - started))
