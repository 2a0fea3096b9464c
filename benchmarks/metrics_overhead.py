"""What the HTTP listener costs the Kafka path: produce/consume with and without a scraper.

Starts one ``pydmq serve`` process with its HTTP listener on a free port, then alternates
rounds without scraping and with a thread fetching ``/metrics`` every second (as Prometheus
would, but 15-60x as often as usual). Each round produces N records of one size with acks=1
(records/s, produce latency p50/p99 from delivery reports) to a fresh 1-partition topic and
consumes them back (records/s). Prints each round, then the median of each mode, and the
scrapes' own time and size. ``--partitions`` adds a topic of that many partitions first, so
the scrape has the per-partition series of a bigger node to render.

    python benchmarks/metrics_overhead.py                     # 300,000 x 100 B, 3 rounds each
    python benchmarks/metrics_overhead.py --records 100000 --rounds 5 --partitions 1000
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import free_port, serve_command, wait_listening  # noqa: E402
from benchmarks.produce_consume import consume, produce  # noqa: E402


class Scraper(threading.Thread):
    """GETs ``url`` every ``period`` seconds until stopped; keeps each scrape's time and size."""

    def __init__(self, url: str, period: float) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.period = period
        self.halt = threading.Event()
        self.times: list[float] = []
        self.sizes: list[int] = []

    def run(self) -> None:
        while not self.halt.is_set():
            started = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                body = answer.read()
            self.times.append(time.perf_counter() - started)
            self.sizes.append(len(body))
            self.halt.wait(max(0.0, self.period - (time.perf_counter() - started)))


def one_round(bootstrap: str, records: int, size: int) -> dict[str, float]:
    topic = f"overhead-{uuid.uuid4().hex[:8]}"
    p = produce(bootstrap, topic, records, size, "1")
    c = consume(bootstrap, topic, records, size)
    return {
        "produce_rec_s": p["records_s"],
        "p50_ms": p["p50_ms"],
        "p99_ms": p["p99_ms"],
        "consume_rec_s": c["records_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each mode")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument("--partitions", type=int, default=0, help="an extra topic's partitions")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pydmq-metrics-bench-") as data_dir:
        port, http_port = free_port(), free_port()
        command = [
            *serve_command(),
            "serve",
            *("--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", data_dir),
            *("--http-listener", f"http://127.0.0.1:{http_port}", "--log-level", "WARNING"),
        ]
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(proc, port, started, 0.01)
            bootstrap = f"127.0.0.1:{port}"
            url = f"http://127.0.0.1:{http_port}/metrics"
            time.sleep(0.5)  # the HTTP listener starts just after the Kafka listeners
            if args.partitions:
                admin = AdminClient({"bootstrap.servers": bootstrap})
                futures = admin.create_topics([NewTopic("wide", args.partitions, 1)])
                futures["wide"].result(120)
            first = time.perf_counter()
            urllib.request.urlopen(url, timeout=30).read()  # imports prometheus_client
            print(f"first scrape (imports prometheus_client): {time.perf_counter() - first:.3f} s")
            results: dict[str, list[dict[str, float]]] = {"no scrape": [], "1 s scrape": []}
            for round_index in range(args.rounds):
                for mode in results:
                    scraper = Scraper(url, args.period) if mode != "no scrape" else None
                    if scraper is not None:
                        scraper.start()
                    figures = one_round(bootstrap, args.records, args.size)
                    if scraper is not None:
                        scraper.halt.set()
                        scraper.join()
                        figures["scrapes"] = len(scraper.times)
                        figures["scrape_ms"] = statistics.median(scraper.times) * 1000
                        figures["scrape_kb"] = statistics.median(scraper.sizes) / 1024
                    results[mode].append(figures)
                    print(f"round {round_index + 1} {mode:<10} " + _line(figures), flush=True)
            for mode, rounds in results.items():
                median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
                print(f"median     {mode:<10} " + _line(median))
        finally:
            proc.terminate()
            proc.wait(30)


def _line(figures: dict[str, float]) -> str:
    text = (
        f"produce {figures['produce_rec_s']:>10,.0f} rec/s p50 {figures['p50_ms']:6.2f} ms "
        f"p99 {figures['p99_ms']:6.2f} ms | consume {figures['consume_rec_s']:>10,.0f} rec/s"
    )
    if "scrape_ms" in figures:
        text += (
            f" | {figures['scrapes']:.0f} scrapes, median {figures['scrape_ms']:.1f} ms, "
            f"{figures['scrape_kb']:.0f} KiB"
        )
    return text


if __name__ == "__main__":
    main()
