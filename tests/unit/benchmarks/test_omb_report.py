"""The OpenMessaging-style benchmark without a broker: the workload matrix, the percentile
and coordinated-omission math of the librdkafka driver, the runner's pure helpers and the
report generator on a synthetic results file."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest
from benchmarks.omb import rdkafka_driver as rd
from benchmarks.omb import report, runner
from benchmarks.omb.workloads import (
    Workload,
    full_matrix,
    make_workload,
    payloads,
    workload_set,
)

# -- workloads ---------------------------------------------------------------------------------


def test_full_matrix_is_every_combination_once() -> None:
    workloads = full_matrix()
    shapes = {
        (w.partitions, w.record_size, w.keyed, w.acks, w.replication_factor) for w in workloads
    }
    assert len(workloads) == len(shapes) == 2 * 2 * 2 * 2 * 2
    assert {w.partitions for w in workloads} == {1, 16}
    assert {w.record_size for w in workloads} == {100, 1024}
    assert {w.acks for w in workloads} == {"1", "all"}
    assert len({w.name for w in workloads}) == len(workloads)
    assert all(w.topics == 1 for w in workloads)


def test_replication_factor_fixes_nodes_and_min_insync() -> None:
    for w in full_matrix():
        if w.replication_factor == 3:
            assert w.nodes == 3
            assert w.topic_configs() == {"min.insync.replicas": "2"}
        else:
            assert w.nodes == 1
            assert w.topic_configs() == {}


def test_goals_set_covers_the_goal_workloads() -> None:
    goals = workload_set("goals")
    shapes = {(w.partitions, w.record_size, w.keyed, w.acks, w.replication_factor) for w in goals}
    assert shapes == {
        (16, 100, False, "all", 1),
        (16, 1024, False, "all", 1),
        (16, 100, False, "all", 3),
        (16, 1024, False, "all", 3),
        (1, 100, False, "1", 1),
    }
    assert all(w in full_matrix() for w in goals)


def test_smoke_set_is_small_and_single_node() -> None:
    smoke = workload_set("smoke")
    assert 1 <= len(smoke) <= 2
    assert all(w.nodes == 1 for w in smoke)


def test_unknown_set_and_bad_acks_are_refused() -> None:
    with pytest.raises(ValueError):
        workload_set("nope")
    with pytest.raises(ValueError):
        Workload("x", 1, 100, False, "0", 1)
    with pytest.raises(ValueError):
        make_workload(1, 4, False, "1", 1)  # too small for an 8-byte send stamp


def test_payloads_are_fixed_random_bytes() -> None:
    first = payloads(100)
    assert first == payloads(100)
    assert all(len(p) == 100 for p in first)
    assert len(set(first)) == len(first)
    assert payloads(1024)[0][:100] != first[0]


# -- percentiles and coordinated omission ------------------------------------------------------


def test_percentiles_by_nearest_rank() -> None:
    figures = rd.percentiles(float(i) for i in range(1, 101))
    assert figures["latency_p50_ms"] == 50
    assert figures["latency_p95_ms"] == 95
    assert figures["latency_p99_ms"] == 99
    assert figures["latency_p999_ms"] == 100
    assert figures["latency_max_ms"] == 100
    assert figures["latency_mean_ms"] == pytest.approx(50.5)
    assert figures["latency_samples"] == 100


def test_percentiles_scale_and_empty() -> None:
    assert rd.percentiles([0.002], scale=1000)["latency_p99_ms"] == pytest.approx(2.0)
    empty = rd.percentiles([])
    assert empty["latency_samples"] == 0
    assert all(math.isnan(v) for k, v in empty.items() if k != "latency_samples")
    assert rd.nearest_rank([7.0], 99.9) == 7.0


def test_latency_is_charged_from_the_intended_send_time() -> None:
    start, rate = 100.0, 1000.0  # one record per ms
    assert rd.intended_send_time(start, 0, rate) == 100.0
    assert rd.intended_send_time(start, 250, rate) == pytest.approx(100.25)
    # The generator stalls for 100 ms after record 9: records 10..109 all go out at 100.110
    # and are delivered 1 ms later. Charged from when they were due, not when they went out.
    deliveries = [(i, 100.0 + i / rate + 0.001) for i in range(10)]
    deliveries += [(i, 100.111) for i in range(10, 110)]
    latencies = rd.corrected_latencies(start, rate, deliveries)
    assert latencies[0] == pytest.approx(0.001)
    assert latencies[10] == pytest.approx(0.101)  # due at 100.010
    assert latencies[109] == pytest.approx(0.002)  # due at 100.109
    figures = rd.percentiles(latencies, scale=1000)
    assert figures["latency_p50_ms"] > 40  # a naive send->ack latency would say 1 ms


def test_probe_stride_and_falling_behind() -> None:
    assert rd.probe_stride(500) == 1
    assert rd.probe_stride(100_000, per_second=20_000) == 5
    assert rd.fell_behind(1000, 989)
    assert not rd.fell_behind(1000, 995)


def test_stamped_records_carry_their_intended_send_time() -> None:
    workload = make_workload(16, 100, True, "all", 1)
    stamped = rd.StampedRecords(workload, rate=1000.0, start_ns=5_000_000_000)
    batch = stamped.batch(3, 2)
    assert [int.from_bytes(m["value"][:8], "big") for m in batch] == [5_003_000_000, 5_004_000_000]
    assert all(len(m["value"]) == 100 and m["key"] for m in batch)


def test_record_ring_reuses_the_pools() -> None:
    ring = rd.record_ring(make_workload(1, 100, False, "1", 1), 3000)
    assert len(ring) == 3000 and "key" not in ring[0]
    assert ring[0]["value"] is ring[len(payloads(100))]["value"]


# -- runner helpers ----------------------------------------------------------------------------


def test_kafka_runs_first_and_single_node_first() -> None:
    assert runner.target_order(["pydmq", "tansu", "kafka"]) == ["kafka", "pydmq", "tansu"]
    groups = runner.node_groups(workload_set("goals"))
    assert [nodes for nodes, _ in groups] == [1, 3]
    assert all(w.nodes == 3 for w in groups[1][1])


def make_run(tmp_path: Path, targets: list[str]) -> runner.Run:
    args = argparse.Namespace(
        targets=targets,
        out=tmp_path / "r.jsonl",
        duration=1.0,
        warmup=0.0,
        latency_fraction=0.5,
        backlog_bytes=1000,
        e2e_rate=None,
        settle=True,
    )
    return runner.Run(args, "python -m benchmarks.omb", machine={"nproc": 2}, commit="abc")


def test_only_latency_modes_settle_dirty_pages_first(tmp_path: Path) -> None:
    run = make_run(tmp_path, ["pydmq"])
    assert [m for m in runner.MODES if run.settles(m)] == ["latency", "e2e"]
    run.args.settle = False
    assert not any(run.settles(m) for m in runner.MODES)


def test_fixed_rate_reference_is_kafka_when_kafka_runs(tmp_path: Path) -> None:
    workload = workload_set("smoke")[0]
    run = make_run(tmp_path, ["kafka", "pydmq"])
    run.max_rates[("pydmq", "librdkafka", workload.name)] = 300.0
    assert run.reference_rate("pydmq", "librdkafka", workload) == (
        300.0,
        "pydmq (Kafka's max unavailable)",
    )
    run.max_rates[("kafka", "librdkafka", workload.name)] = 1000.0
    assert run.reference_rate("pydmq", "librdkafka", workload) == (1000.0, "kafka")
    alone = make_run(tmp_path, ["pydmq"])
    alone.max_rates[("pydmq", "librdkafka", workload.name)] = 300.0
    assert alone.reference_rate("pydmq", "librdkafka", workload) == (300.0, "pydmq")
    assert alone.reference_rate("tansu", "librdkafka", workload) is None


def test_parse_args_defaults_and_refusals() -> None:
    args = runner.parse_args(["--targets", "pydmq,kafka", "--set", "smoke"])
    assert args.targets == ["pydmq", "kafka"] and args.driver == ["librdkafka"]
    assert args.backlog_bytes == 10 * 1024**3 and args.latency_fraction == 0.5
    assert runner.parse_args(["--e2e-rate", "latency"]).e2e_rate is None
    assert runner.parse_args(["--backlog-bytes", "2GiB"]).backlog_bytes == 2 * 1024**3
    assert runner.parse_args(["--backlog-bytes", "500MB"]).backlog_bytes == 500_000_000
    assert runner.parse_args(["--backlog-bytes", "1234"]).backlog_bytes == 1234
    with pytest.raises(SystemExit):
        runner.parse_args(["--targets", "redpanda"])
    with pytest.raises(SystemExit):
        runner.parse_args(["--latency-fraction", "0"])
    with pytest.raises(SystemExit):
        runner.parse_args(["--backlog-bytes", "10 parsecs"])


def test_result_line_is_json_with_the_context(tmp_path: Path) -> None:
    run = make_run(tmp_path, ["pydmq"])
    workload = workload_set("smoke")[0]
    line = run.record(
        None, "librdkafka", workload, "ceiling", "ok", {"records_per_s": 5.0, "x": math.nan}
    )
    assert line["target"] == "client" and line["figures"] == {"records_per_s": 5.0, "x": None}
    stored = json.loads((tmp_path / "r.jsonl").read_text())
    for field in ("timestamp", "git_commit", "machine", "command", "workload", "mode", "driver"):
        assert field in stored
    assert stored["workload"]["nodes"] == 1


def test_a_failed_mode_is_counted_and_recorded_with_its_cause(tmp_path: Path) -> None:
    run = make_run(tmp_path, ["pydmq"])
    workload = workload_set("smoke")[0]
    run.fail(None, "librdkafka", workload, "consume", ValueError("boom"), "filling failed:")
    stored = json.loads((tmp_path / "r.jsonl").read_text())
    assert run.failures == 1 and stored["status"] == "error"
    assert stored["note"] == "filling failed: ValueError: boom"


def test_broker_sampler_reads_this_process(tmp_path: Path) -> None:
    import os

    with runner.BrokerSampler([os.getpid()], interval=0.01) as sampler:
        sum(i * i for i in range(200_000))
    figures = sampler.figures(1e9)
    assert figures["broker_rss_max_mb"] > 1
    assert 0 < figures["broker_private_rss_max_mb"] <= figures["broker_rss_max_mb"]
    assert figures["broker_cpu_s"] >= 0
    assert figures["broker_cpu_s_per_gb"] == figures["broker_cpu_s"]


# -- report ------------------------------------------------------------------------------------


def line(
    target: str, nodes: int, workload: Workload, mode: str, **figures: float
) -> dict[str, Any]:
    return {
        "timestamp": "2026-01-01T00:00:00+00:00",
        "target": target,
        "target_version": {"pydmq": "0.1.0", "kafka": "4.4.0", "tansu": "0.6.0"}.get(target, ""),
        "nodes": nodes,
        "storage": "disk",
        "driver": "librdkafka",
        "workload": workload.fields(),
        "mode": mode,
        "status": "ok",
        "note": "",
        "figures": figures,
        "settings": {"latency_fraction": 0.5},
        "machine": {"nproc": 2, "cpu_model": "Test CPU", "memory_gib": 8.0},
        "git_commit": "abc123",
        "command": "python -m benchmarks.omb --targets kafka,pydmq,tansu --set goals",
    }


def synthetic_results() -> list[dict[str, Any]]:
    rf1 = make_workload(16, 100, False, "all", 1)
    rf3 = make_workload(16, 1024, False, "all", 3)
    results = []
    for target, scale in (("kafka", 1.0), ("pydmq", 1.2), ("tansu", 0.5)):
        results.append(
            line(target, 1, rf1, "produce", records_per_s=1e5 * scale, mb_per_s=10 * scale)
        )
        results.append(
            line(target, 1, rf1, "consume", records_per_s=2e5 / scale, mb_per_s=20 / scale)
        )
        p99 = 4.0 * scale
        results.append(
            line(
                target,
                1,
                rf1,
                "latency",
                latency_p50_ms=1.0,
                latency_p99_ms=p99,
                latency_p999_ms=9.0,
            )
        )
        results.append(
            line(
                target,
                1,
                rf1,
                "e2e",
                latency_p50_ms=2.0,
                latency_p99_ms=8.0 * scale,
                latency_p999_ms=20,
            )
        )
    results.append(line("kafka", 3, rf3, "produce", records_per_s=5e4, mb_per_s=51.2))
    results.append(
        line("pydmq", 3, rf3, "produce", records_per_s=4e4, mb_per_s=41.0, client_bound=1.0)
    )
    skipped = line("tansu", 3, rf3, "all")
    skipped.update(status="skipped", note="the tansu target has a single node")
    results.append(skipped)
    failed = line("pydmq", 1, rf1, "backlog")
    failed.update(status="error", note="TimeoutError")
    results.append(failed)
    return results


def write_results(path: Path, results: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in results))
    return path


def goal(rows: list[report.GoalRow], text: str, workload: str) -> report.GoalRow:
    found = [r for r in rows if text in r.goal and r.workload == workload]
    assert len(found) == 1, (text, workload, rows)
    return found[0]


def test_goals_are_judged_against_the_references() -> None:
    rows = report.evaluate_goals(report.latest(synthetic_results()))
    rf1, rf3 = "p16-100B-unkeyed-acksall-rf1", "p16-1KiB-unkeyed-acksall-rf3"
    assert goal(rows, "produce throughput ≥ 1.0x kafka", rf1).met is True
    assert goal(rows, "produce throughput ≥ 1.0x kafka", rf3).met is False
    assert goal(rows, "consume throughput ≥ 1.0x kafka", rf1).met is False
    assert goal(rows, "produce throughput ≥ 1.0x tansu", rf1).met is True
    assert goal(rows, "consume throughput ≥ 1.0x tansu", rf1).met is False
    latency = goal(rows, "Kafka's p99", rf1)
    assert latency.met is False and latency.ours == pytest.approx(4.8)
    e2e = goal(rows, "end-to-end p99", rf1)
    assert e2e.met is True and e2e.ours == pytest.approx(9.6)
    assert not [r for r in rows if "tansu" in r.goal and r.workload == rf3]


def test_latency_goal_needs_the_same_pace() -> None:
    workload = make_workload(16, 100, False, "all", 1)
    kafka = line("kafka", 1, workload, "latency", latency_p99_ms=5.0, target_rate=1000.0)
    same = line("pydmq", 1, workload, "latency", latency_p99_ms=4.0, target_rate=1000.0)
    faster = line("pydmq", 1, workload, "latency", latency_p99_ms=4.0, target_rate=2000.0)
    assert goal(report.latency_goals(report.latest([kafka, same])), "p99", workload.name).met
    row = goal(report.latency_goals(report.latest([kafka, faster])), "p99", workload.name)
    assert row.met is None and row.verdict.startswith("not comparable")


def test_latest_result_wins_and_failures_do_not_override() -> None:
    workload = workload_set("smoke")[0]
    old = line("pydmq", 1, workload, "produce", records_per_s=1.0)
    new = line("pydmq", 1, workload, "produce", records_per_s=2.0)
    failed = line("pydmq", 1, workload, "produce")
    failed["status"] = "error"
    chosen = report.latest([old, new, failed])
    assert len(chosen) == 1
    assert report.figure(next(iter(chosen.values())), "records_per_s") == 2.0


def test_render_has_tables_ratios_and_context() -> None:
    text = report.render(
        synthetic_results(), Path("r.jsonl"), "python -m benchmarks.omb.report r.jsonl"
    )
    assert "python -m benchmarks.omb --targets kafka,pydmq,tansu --set goals" in text
    assert "python -m benchmarks.omb.report r.jsonl" in text
    assert "2 CPUs (Test CPU)" in text and "abc123" in text
    assert "| workload | driver | pydmq | kafka | tansu | pydmq/kafka (rec/s) |" in text
    assert "120 k rec/s (12.0 MB/s)" in text
    assert "1.20x" in text and "2.40x" in text  # pydmq/kafka, pydmq/tansu produce
    assert "40 k rec/s (41.0 MB/s)†" in text  # client-bound mark
    assert "the tansu target has a single node" in text
    assert "TimeoutError" in text
    assert "**missed**" in text and "| met |" in text


def test_merge_keeps_hand_written_text() -> None:
    first = report.merge_markdown(None, "generated one")
    assert first.startswith("# pydmq performance")
    assert report.START_MARKER in first and "generated one" in first
    edited = (
        "# Mine\n\nintro\n\n" + first[first.index(report.START_MARKER) :] + "\n## After\nkept\n"
    )
    second = report.merge_markdown(edited, "generated two")
    assert second.startswith("# Mine\n\nintro\n\n")
    assert "generated two" in second and "generated one" not in second
    assert second.endswith("\n## After\nkept\n")
    appended = report.merge_markdown("# No markers\n", "gen")
    assert appended.startswith("# No markers\n") and appended.rstrip().endswith(report.END_MARKER)


def test_report_command_writes_markdown_and_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    results = write_results(tmp_path / "results.jsonl", synthetic_results())
    markdown = tmp_path / "docs" / "PERFORMANCE.md"
    markdown.parent.mkdir()
    markdown.write_text("# Perf\n\nby hand\n")
    png = tmp_path / "docs" / "performance.png"
    assert report.main([str(results), "--markdown", str(markdown), "--plot", str(png)]) == 0
    text = markdown.read_text()
    assert text.startswith("# Perf\n\nby hand\n")
    assert text.count(report.START_MARKER) == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.main([str(results), "--markdown", str(markdown)]) == 0
    assert markdown.read_text().count(report.START_MARKER) == 1


def test_a_series_of_rounds_reports_its_median_round() -> None:
    w = make_workload(16, 100, False, "all", 1)
    old = line("pydmq", 1, w, "consume", records_per_s=900.0)
    rounds = [
        {**line("pydmq", 1, w, mode, records_per_s=rate, latency_p99_ms=p99), "series": "s1"}
        for rate, p99 in ((300.0, 9.0), (500.0, 3.0), (400.0, 5.0), (100.0, 7.0))
        for mode in ("consume", "latency")
    ]
    chosen = report.latest([old, *rounds])
    key = ("pydmq", 1, "librdkafka", w.name, "consume")
    # four rounds: the lower middle throughput and the higher middle p99 (less flattering)
    assert report.figure(chosen[key], "records_per_s") == 300.0
    assert report.figure(chosen[(*key[:4], "latency")], "latency_p99_ms") == 7.0
    assert report.rounds_of(chosen[key], [old, *rounds]) == 4
    section = report.rounds_section(chosen, [old, *rounds])
    assert section == [
        f"- `{w.name}` consume, librdkafka: median of 4 alternating rounds (pydmq)",
        f"- `{w.name}` latency, librdkafka: median of 4 alternating rounds (pydmq)",
    ]
    # a later single run without a series replaces the series
    newer = line("pydmq", 1, w, "consume", records_per_s=700.0)
    assert report.figure(report.latest([*rounds, newer])[key], "records_per_s") == 700.0
