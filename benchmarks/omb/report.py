"""Turn ``results.jsonl`` into a Markdown section (and a PNG) comparing the targets.

    python -m benchmarks.omb.report build/omb/results.jsonl \\
        --markdown docs/PERFORMANCE.md --plot docs/performance.png

The Markdown file keeps whatever is written by hand outside the generated block: only the
text between ``<!-- generated:start -->`` and ``<!-- generated:end -->`` is replaced (the
block is appended when the file has none, the file created when missing). The block holds
the exact commands, versions and machine, the performance goals each marked met / missed
with the figures, and one table per mode with every target's absolute figures and the
ratios pydmq/Kafka and pydmq/Tansu. When a result file holds several results for the same
target, nodes, driver, workload and mode, the last one counts.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "END_MARKER",
    "START_MARKER",
    "GoalRow",
    "evaluate_goals",
    "latest",
    "load_results",
    "main",
    "merge_markdown",
    "plot",
    "render",
]

START_MARKER = "<!-- generated:start -->"
END_MARKER = "<!-- generated:end -->"
DEFAULT_HEAD = """# pydmq performance

Hand-written notes go here (outside the generated block): what changed since the last
run, how to read the figures, caveats of the machine. `python -m benchmarks.omb.report`
only rewrites the block between the `generated` markers below.

"""
TARGET_ORDER = ("pydmq", "kafka", "tansu")
THROUGHPUT_MODES = ("produce", "consume", "backlog")
LATENCY_MODES = ("latency", "e2e")
MODE_TITLES = {
    "ceiling": "Load generator ceiling (no broker)",
    "produce": "Max-rate produce",
    "consume": "Consume (max rate, from offset 0)",
    "latency": "Fixed-rate produce latency (CO-corrected)",
    "e2e": "End-to-end latency",
    "backlog": "Backlog catch-up (consume a backlog from offset 0)",
}
DEFINITIONS = [
    "How to read these figures: records/s and MB/s (10^6 bytes of record values) count what",
    "the broker acknowledged (produce) or what the consumer received (consume, backlog).",
    "Max-rate latency is delivery report minus enqueue time; fixed-rate latency is delivery",
    "report minus each record's *intended* send time (start + i/rate), so stalls are charged",
    "to every record that should have been sent meanwhile; end-to-end latency is consumer",
    "receive time minus the send stamp in the record. Each producer and consumer is its own",
    "Python process; the ceiling table shows how fast one such producer can go with no broker.",
    "Broker CPU-s/GB is the target's CPU time during the mode per GB of record values.",
]
GOAL_PARTITIONS = 16
GOAL_SIZES = (100, 1024)
E2E_P99_GOAL_MS = 10.0
RATE_TOLERANCE = 0.01  # fixed-rate runs paced within 1 % of each other compare
RATIO_LABELS = {"records_per_s": "rec/s", "latency_p99_ms": "p99"}
CLIENT_BOUND_MARK = "†"
BEHIND_MARK = "‡"

Result = dict[str, Any]
Key = tuple[str, int, str, str, str]  # target, nodes, driver, workload name, mode


# -- loading ---------------------------------------------------------------------------------


def load_results(path: Path) -> list[Result]:
    """Every JSON line of ``path`` (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def key_of(result: Result) -> Key:
    return (
        result["target"],
        int(result["nodes"]),
        result["driver"],
        result["workload"]["name"],
        result["mode"],
    )


def latest(results: Iterable[Result]) -> dict[Key, Result]:
    """Per target, nodes, driver, workload and mode: the last successful result, or, when
    it belongs to a series of rounds (``--rounds``), the median round of that series."""
    by_key: dict[Key, list[Result]] = {}
    for result in results:
        if result.get("status") == "ok":
            by_key.setdefault(key_of(result), []).append(result)
    chosen: dict[Key, Result] = {}
    for key, found in by_key.items():
        last = found[-1]
        series = last.get("series")
        rounds = [r for r in found if series is not None and r.get("series") == series]
        chosen[key] = median_round(rounds or [last], key[4])
    return chosen


def median_round(rounds: list[Result], mode: str) -> Result:
    """The median result by the mode's headline figure; of an even count, the less
    flattering of the two middle ones (lower throughput, higher p99)."""
    if len(rounds) == 1:
        return rounds[0]
    name = "latency_p99_ms" if mode in LATENCY_MODES else "records_per_s"
    ranked = sorted(rounds, key=lambda r: figure(r, name) or 0.0)
    return ranked[len(ranked) // 2 if mode in LATENCY_MODES else (len(ranked) - 1) // 2]


def rounds_of(result: Result, results: Iterable[Result]) -> int:
    """How many rounds of ``result``'s series there are for its key (1 without a series)."""
    series = result.get("series")
    if series is None:
        return 1
    key = key_of(result)
    return sum(
        1
        for r in results
        if r.get("status") == "ok" and r.get("series") == series and key_of(r) == key
    )


def figure(result: Result | None, name: str) -> float | None:
    if result is None:
        return None
    value = result.get("figures", {}).get(name)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def targets_in(results: Iterable[Result]) -> list[str]:
    names = {r["target"] for r in results if r["target"] != "client"}
    return sorted(names, key=lambda n: (TARGET_ORDER.index(n) if n in TARGET_ORDER else 99, n))


def rows_of(chosen: dict[Key, Result], mode: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(workload name, driver, workload fields) of every row of ``mode``'s table, in order."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for key, result in chosen.items():
        if key[4] == mode:
            rows.setdefault((key[3], key[2]), result["workload"])
    ordered = sorted(rows.items(), key=lambda item: workload_sort_key(item[1], item[0][1]))
    return [(name, driver, fields) for (name, driver), fields in ordered]


def workload_sort_key(fields: dict[str, Any], driver: str) -> tuple[object, ...]:
    return (
        fields["replication_factor"],
        fields["partitions"],
        fields["record_size"],
        fields["keyed"],
        fields["acks"],
        driver,
    )


def lookup(
    chosen: dict[Key, Result], target: str, driver: str, workload: str, mode: str
) -> Result | None:
    """The result of ``target`` for a workload (any node count: a workload fixes it)."""
    for key, result in chosen.items():
        if key[0] == target and key[2] == driver and key[3] == workload and key[4] == mode:
            return result
    return None


# -- formatting ------------------------------------------------------------------------------


def fmt_number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if digits == 0 and abs(value) >= 1e6:
        return f"{value / 1e6:.2f} M"
    if digits == 0 and abs(value) >= 1e4:
        return f"{value / 1e3:.0f} k"
    return f"{value:,.{digits}f}"


def fmt_ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None or denominator == 0:
        return "-"
    return f"{numerator / denominator:.2f}x"


def marks(result: Result | None) -> str:
    """Footnote marks: the client was the bottleneck / the generator fell behind."""
    if result is None:
        return ""
    text = CLIENT_BOUND_MARK if figure(result, "client_bound") else ""
    return text + (BEHIND_MARK if figure(result, "behind") else "")


def throughput_cell(result: Result | None) -> str:
    if result is None:
        return "-"
    rate = fmt_number(figure(result, "records_per_s"))
    mb = fmt_number(figure(result, "mb_per_s"), 1)
    return f"{rate} rec/s ({mb} MB/s){marks(result)}"


def latency_cell(result: Result | None) -> str:
    if result is None:
        return "-"
    p50, p99, p999 = (
        fmt_number(figure(result, f"latency_{p}_ms"), 2) for p in ("p50", "p99", "p999")
    )
    rate = figure(result, "target_rate")
    pace = f" @ {fmt_number(rate)}/s" if rate else ""
    return f"{p50} / {p99} / {p999}{pace}{marks(result)}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def ratio_columns(targets: Sequence[str]) -> list[str]:
    """The comparisons the report makes: pydmq against each reference present."""
    if "pydmq" not in targets:
        return []
    return [t for t in ("kafka", "tansu") if t in targets]


# -- tables per mode -------------------------------------------------------------------------


def mode_table(
    chosen: dict[Key, Result],
    mode: str,
    targets: Sequence[str],
    cell: Callable[[Result | None], str],
    ratio_figure: str,
) -> list[str]:
    refs = ratio_columns(targets)
    label = RATIO_LABELS.get(ratio_figure, ratio_figure)
    header = ["workload", "driver", *targets, *(f"pydmq/{ref} ({label})" for ref in refs)]
    rows = []
    for name, driver, _ in rows_of(chosen, mode):
        found = {t: lookup(chosen, t, driver, name, mode) for t in targets}
        ours = figure(found.get("pydmq"), ratio_figure)
        ratios = [fmt_ratio(ours, figure(found[ref], ratio_figure)) for ref in refs]
        rows.append([f"`{name}`", driver, *(cell(found[t]) for t in targets), *ratios])
    return table(header, rows)


def ceiling_table(chosen: dict[Key, Result]) -> list[str]:
    rows = []
    for name, driver, _ in rows_of(chosen, "ceiling"):
        result = lookup(chosen, "client", driver, name, "ceiling")
        rows.append(
            [
                f"`{name}`",
                driver,
                throughput_cell(result),
                fmt_number(figure(result, "client_main_thread_util"), 2),
            ]
        )
    return table(["workload", "driver", "enqueue rate", "main-thread CPU"], rows)


def resources_table(chosen: dict[Key, Result], targets: Sequence[str]) -> list[str]:
    """Broker CPU-seconds per GB and peak RSS (private RSS, without mapped file pages, in
    parentheses where it was sampled and differs), per throughput mode."""
    header = ["workload", "driver", "mode", *(f"{t} CPU-s/GB · RSS MB" for t in targets)]
    rows = []
    for mode in THROUGHPUT_MODES:
        for name, driver, _ in rows_of(chosen, mode):
            cells = []
            for target in targets:
                result = lookup(chosen, target, driver, name, mode)
                cpu = fmt_number(figure(result, "broker_cpu_s_per_gb"), 1)
                rss = fmt_number(figure(result, "broker_rss_max_mb"), 0)
                private = fmt_number(figure(result, "broker_private_rss_max_mb"), 0)
                if figure(result, "broker_private_rss_max_mb") is not None and private != rss:
                    rss = f"{rss} ({private})"
                cells.append("-" if result is None else f"{cpu} · {rss}")
            rows.append([f"`{name}`", driver, mode, *cells])
    return table(header, rows)


# -- goals -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoalRow:
    goal: str
    workload: str
    driver: str
    ours: float | None
    reference: float | None
    unit: str
    met: bool | None  # None: not measured, or not comparable (see ``note``)
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.met is None and self.note:
            return self.note
        return {True: "met", False: "**missed**", None: "not measured"}[self.met]


def goal_workloads(
    chosen: dict[Key, Result], mode: str, rfs: Sequence[int]
) -> list[tuple[str, str]]:
    """(workload, driver) pairs the throughput goals are judged on."""
    return [
        (name, driver)
        for name, driver, fields in rows_of(chosen, mode)
        if fields["partitions"] == GOAL_PARTITIONS
        and not fields["keyed"]
        and fields["acks"] == "all"
        and fields["record_size"] in GOAL_SIZES
        and fields["replication_factor"] in rfs
    ]


def ratio_goals(
    chosen: dict[Key, Result], mode: str, reference: str, rfs: Sequence[int]
) -> list[GoalRow]:
    """pydmq's records/s ≥ 1.0x ``reference``'s for the goal workloads."""
    label = f"{mode} throughput ≥ 1.0x {reference}"
    rows = []
    for name, driver in goal_workloads(chosen, mode, rfs):
        ours = figure(lookup(chosen, "pydmq", driver, name, mode), "records_per_s")
        ref = figure(lookup(chosen, reference, driver, name, mode), "records_per_s")
        met = None if ours is None or ref is None else ours >= ref
        rows.append(GoalRow(label, name, driver, ours, ref, "rec/s", met))
    return rows


def latency_goals(chosen: dict[Key, Result]) -> list[GoalRow]:
    """pydmq's p99 at a fixed fraction of Kafka's max rate ≤ Kafka's p99."""
    rows = []
    for name, driver, _ in rows_of(chosen, "latency"):
        ours_result = lookup(chosen, "pydmq", driver, name, "latency")
        fraction = (ours_result or {}).get("settings", {}).get("latency_fraction", 0.5)
        label = f"p99 at {fraction:g} x Kafka's max rate ≤ Kafka's p99"
        kafka = lookup(chosen, "kafka", driver, name, "latency")
        ours, ref = figure(ours_result, "latency_p99_ms"), figure(kafka, "latency_p99_ms")
        met = None if ours is None or ref is None else ours <= ref
        note = pace_mismatch(ours_result, kafka)
        rows.append(GoalRow(label, name, driver, ours, ref, "ms", None if note else met, note))
    return rows


def pace_mismatch(ours: Result | None, kafka: Result | None) -> str:
    """Why two fixed-rate runs cannot be compared: they were paced differently."""
    ours_rate, kafka_rate = figure(ours, "target_rate"), figure(kafka, "target_rate")
    if ours_rate is None or kafka_rate is None or kafka_rate == 0:
        return ""
    if abs(ours_rate - kafka_rate) / kafka_rate <= RATE_TOLERANCE:
        return ""
    return (
        f"not comparable: paced at {fmt_number(ours_rate)}/s vs Kafka's {fmt_number(kafka_rate)}/s"
    )


def e2e_goals(chosen: dict[Key, Result]) -> list[GoalRow]:
    """pydmq's end-to-end p99 ≤ 10 ms on one node."""
    rows = []
    for name, driver, fields in rows_of(chosen, "e2e"):
        if fields["nodes"] != 1:
            continue
        ours = figure(lookup(chosen, "pydmq", driver, name, "e2e"), "latency_p99_ms")
        met = None if ours is None else ours <= E2E_P99_GOAL_MS
        label = f"end-to-end p99 ≤ {E2E_P99_GOAL_MS:g} ms (one node)"
        rows.append(GoalRow(label, name, driver, ours, E2E_P99_GOAL_MS, "ms", met))
    return rows


def evaluate_goals(chosen: dict[Key, Result]) -> list[GoalRow]:
    rows: list[GoalRow] = []
    for mode in ("produce", "consume"):
        rows += ratio_goals(chosen, mode, "kafka", (1, 3))
    for mode in ("produce", "consume"):
        rows += ratio_goals(chosen, mode, "tansu", (1,))
    return rows + latency_goals(chosen) + e2e_goals(chosen)


def with_unit(value: float | None, digits: int, unit: str) -> str:
    return "-" if value is None else f"{fmt_number(value, digits)} {unit}"


def goals_section(chosen: dict[Key, Result]) -> list[str]:
    rows = evaluate_goals(chosen)
    if not rows:
        return ["No result covers a goal workload yet."]
    digits = {"rec/s": 0, "ms": 2}
    body = [
        [
            row.goal,
            f"`{row.workload}`",
            row.driver,
            with_unit(row.ours, digits[row.unit], row.unit),
            with_unit(row.reference, digits[row.unit], row.unit),
            fmt_ratio(row.ours, row.reference),
            row.verdict,
        ]
        for row in rows
    ]
    met = sum(1 for row in rows if row.met)
    summary = f"{met} of {len(rows)} goal checks met."
    return [
        summary,
        "",
        *table(["goal", "workload", "driver", "pydmq", "reference", "ratio", ""], body),
    ]


# -- context ---------------------------------------------------------------------------------


def distinct(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(v for v in values if v not in (None, "")))


def context_section(results: Sequence[Result], source: Path, report_command: str) -> list[str]:
    lines = ["Produced by:", ""]
    lines += [f"    {command}" for command in distinct(r.get("command") for r in results)]
    lines += [f"    {report_command}", ""]
    commits = ", ".join(f"`{c}`" for c in distinct(r.get("git_commit") for r in results))
    stamps = sorted(distinct(r.get("timestamp") for r in results))
    span = f"{stamps[0]} … {stamps[-1]}" if stamps else "unknown"
    lines += [f"- results: `{source}` ({len(results)} lines, {span})", f"- git commit: {commits}"]
    for machine in distinct(json.dumps(r.get("machine"), sort_keys=True) for r in results):
        m = json.loads(machine) or {}
        lines.append(
            f"- machine: {m.get('nproc')} CPUs ({m.get('cpu_model')}), "
            f"{m.get('memory_gib')} GiB RAM, Linux {m.get('kernel')}, "
            f"Python {m.get('python')}, {m.get('librdkafka')}"
        )
    lines += ["", *targets_table(results)]
    return lines


def targets_table(results: Sequence[Result]) -> list[str]:
    seen: dict[tuple[str, int], Result] = {}
    for result in results:
        if result["target"] != "client" and result.get("target_version"):
            seen[(result["target"], int(result["nodes"]))] = result
    rows = [
        [name, str(nodes), r["target_version"], r.get("storage", "")]
        for (name, nodes), r in sorted(seen.items())
    ]
    return table(["target", "nodes", "version", "storage"], rows)


def not_measured_section(results: Sequence[Result], chosen: dict[Key, Result]) -> list[str]:
    """Skipped and failed runs with no later success, with the reason."""
    lines = []
    for result in results:
        if result.get("status") in ("skipped", "error") and key_of(result) not in chosen:
            lines.append(
                f"- {result['target']} x{result['nodes']} {result['driver']} "
                f"`{result['workload']['name']}` {result['mode']}: {result['status']} -- "
                f"{result.get('note', '')}"
            )
    return list(dict.fromkeys(lines)) or ["- none"]


def rounds_section(chosen: dict[Key, Result], results: Sequence[Result]) -> list[str]:
    """One line per workload, mode and driver whose figures are medians of rounds."""
    medians: dict[tuple[str, str, str, int], list[str]] = {}
    for key, result in chosen.items():
        count = rounds_of(result, results)
        if count > 1:
            medians.setdefault((key[3], key[4], key[2], count), []).append(key[0])
    return [
        f"- `{name}` {mode}, {driver}: median of {count} alternating rounds ({', '.join(targets)})"
        for (name, mode, driver, count), targets in medians.items()
    ]


# -- the document ----------------------------------------------------------------------------


def render(results: Sequence[Result], source: Path, report_command: str) -> str:
    """The generated block's Markdown (without the markers)."""
    chosen = latest(results)
    targets = targets_in(chosen.values())
    lines = ["## Benchmark results (generated)", ""]
    lines += context_section(results, source, report_command)
    lines += ["", *DEFINITIONS, ""]
    medians = rounds_section(chosen, results)
    if medians:
        lines += ["Figures measured in rounds (`--rounds`) are the median round:", "", *medians, ""]
    lines += ["### Goals", "", *goals_section(chosen), ""]
    if rows_of(chosen, "ceiling"):
        lines += [f"### {MODE_TITLES['ceiling']}", "", *ceiling_table(chosen), ""]
    for mode in ("produce", "consume", "backlog"):
        if rows_of(chosen, mode):
            lines += [f"### {MODE_TITLES[mode]}", ""]
            lines += [*mode_table(chosen, mode, targets, throughput_cell, "records_per_s"), ""]
    for mode in LATENCY_MODES:
        if rows_of(chosen, mode):
            lines += [f"### {MODE_TITLES[mode]}", "", "p50 / p99 / p99.9 in ms.", ""]
            lines += [*mode_table(chosen, mode, targets, latency_cell, "latency_p99_ms"), ""]
    lines += ["### Broker resources", "", *resources_table(chosen, targets), ""]
    lines += ["### Not measured", "", *not_measured_section(results, chosen), ""]
    lines += [
        f"{CLIENT_BOUND_MARK} the load generator's Python thread was ≥ 90 % busy: the client, "
        "not the broker, may have set the figure.  ",
        f"{BEHIND_MARK} the generator fell more than 1 % behind its fixed rate.",
    ]
    return "\n".join(lines)


def merge_markdown(existing: str | None, generated: str) -> str:
    """``existing`` with its generated block replaced (hand-written text kept)."""
    block = f"{START_MARKER}\n{generated.rstrip()}\n{END_MARKER}"
    if existing is None:
        return f"{DEFAULT_HEAD}{block}\n"
    start = existing.find(START_MARKER)
    end = existing.find(END_MARKER, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return f"{existing.rstrip()}\n\n{block}\n"
    return existing[:start] + block + existing[end + len(END_MARKER) :]


# -- the plot --------------------------------------------------------------------------------


def series_names(chosen: dict[Key, Result]) -> list[tuple[str, str]]:
    """(target, driver) pairs with results, in report order."""
    pairs = {(k[0], k[2]) for k in chosen if k[0] != "client"}
    targets = targets_in([{"target": t} for t, _ in pairs])
    return sorted(pairs, key=lambda p: (targets.index(p[0]), p[1]))


def bar_panel(
    axis: Any, chosen: dict[Key, Result], mode: str, metric: str = "mb_per_s", ylabel: str = "MB/s"
) -> None:
    """Grouped bars: one group per workload, one bar per target (and driver)."""
    workloads = distinct(name for name, _, _ in rows_of(chosen, mode))
    series = series_names(chosen)
    width = 0.8 / max(1, len(series))
    for index, (target, driver) in enumerate(series):
        values = [
            figure(lookup(chosen, target, driver, name, mode), metric) or 0.0 for name in workloads
        ]
        positions = [i + index * width for i in range(len(workloads))]
        axis.bar(positions, values, width, label=series_label(target, driver, series))
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(workloads))])
    axis.set_xticklabels(workloads, rotation=20, ha="right", fontsize=7)
    axis.set_title(MODE_TITLES[mode], fontsize=9)
    axis.set_ylabel(ylabel)
    axis.legend(fontsize=7)


def latency_panel(axis: Any, chosen: dict[Key, Result], mode: str) -> None:
    """p99 bars per workload and target, with p50 (dot) and p99.9 (triangle) markers."""
    workloads = distinct(name for name, _, _ in rows_of(chosen, mode))
    series = series_names(chosen)
    width = 0.8 / max(1, len(series))
    for index, (target, driver) in enumerate(series):
        found = [lookup(chosen, target, driver, name, mode) for name in workloads]
        positions = [i + index * width for i in range(len(workloads))]
        p99 = [figure(r, "latency_p99_ms") or 0.0 for r in found]
        axis.bar(positions, p99, width, label=series_label(target, driver, series))
        for name, marker in (("latency_p50_ms", "o"), ("latency_p999_ms", "^")):
            values = [figure(r, name) for r in found]
            points = [(x, v) for x, v in zip(positions, values, strict=True) if v]
            if points:
                xs, ys = zip(*points, strict=True)
                axis.scatter(xs, ys, marker=marker, color="black", s=12, zorder=3)
    axis.set_yscale("log")
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(workloads))])
    axis.set_xticklabels(workloads, rotation=20, ha="right", fontsize=7)
    axis.set_title(f"{MODE_TITLES[mode]}: p99 bars, p50 ●, p99.9 ▲", fontsize=9)
    axis.set_ylabel("ms (log)")
    axis.legend(fontsize=7)


def series_label(target: str, driver: str, series: Sequence[tuple[str, str]]) -> str:
    drivers = {d for _, d in series}
    return target if len(drivers) == 1 else f"{target} ({driver})"


def plot(results: Sequence[Result], path: Path) -> None:
    """Throughput and latency panels for the modes present, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = latest(results)
    panels: list[Callable[[Any], None]] = []
    for mode in ("produce", "consume", "backlog"):
        if rows_of(chosen, mode):
            panels.append(functools.partial(bar_panel, chosen=chosen, mode=mode))
    for mode in LATENCY_MODES:
        if rows_of(chosen, mode):
            panels.append(functools.partial(latency_panel, chosen=chosen, mode=mode))
    if not panels:
        raise ValueError("no successful result to plot")
    columns = 2 if len(panels) > 1 else 1
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(7 * columns, 4.2 * rows), squeeze=False)
    for axis, draw in zip(axes.flat, panels, strict=False):
        draw(axis)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.omb.report")
    parser.add_argument("results", type=Path, help="results.jsonl from python -m benchmarks.omb")
    parser.add_argument("--markdown", type=Path, help="Markdown file to write/update")
    parser.add_argument("--plot", type=Path, help="PNG to write")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", "-m", "benchmarks.omb.report", *given])
    results = load_results(args.results)
    generated = render(results, args.results, command)
    if args.markdown:
        existing = args.markdown.read_text() if args.markdown.exists() else None
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(merge_markdown(existing, generated))
        print(f"wrote {args.markdown}")
    else:
        print(generated)
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
