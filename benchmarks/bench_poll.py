"""What one replica pays to watch many tables that have nothing to do.

    python benchmarks/bench_poll.py [--tables 200] [--polls 10] [--poll-interval 30] [--schedule]

Builds TABLES small MOR tables (version 8, two commits each, nothing pending; build untimed), then runs the
supervisor's poll over all of them (embedded coordination, no Spark) POLLS times. With ``--schedule`` every
table schedules compaction and clean (Hudi's default triggers: the clean's fires, with nothing to clean) and
every poll re-evaluates it (``reschedule_interval: 0s``); the run then also reports how often the table lock
was taken and how long it was held, and whether ``/healthz`` (asked every 50 ms from another thread, served
by the daemon's own health server) stayed green from the first poll on.
The first poll is cold (every table's config read and timeline parsed); the later ones find every timeline
listing unchanged. Printed per poll: wall time, CPU time (this process), and per table; the CPU share of
one core at the given poll interval; and, as the baseline measured in the same run, the cost of what a
poller without the listing cache would do: ``Table.load`` of every table (config read + timeline listed and
parsed) and a pending-instant scan, with the ratio ours / baseline.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodied.config import DaemonConfig
from hoodied.coordination import EmbeddedCoordination
from hoodied.health import HealthServer, Heartbeats
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor


def _no_spark() -> object:
    raise RuntimeError("the poll benchmark runs no jobs")


def build(root: Path, n: int) -> list[Path]:
    """One small table written, then copied ``n`` times (writing each would take the writer's clock-skew
    waits n times over; the poll cannot tell copies apart)."""
    template = root / "template"
    spec = GenerateSpec(table_version=8, rows=20, commits=2, partitions=1, seed=1, update_fraction=0.5)
    generate_table(str(template), spec)
    paths = []
    for i in range(n):
        path = root / f"t{i:05d}"
        shutil.copytree(template, path)
        paths.append(path)
    return paths


def measure(fn: object, repeat: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()  # type: ignore[operator]
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return walls, cpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--polls", type=int, default=10)
    ap.add_argument("--poll-interval", type=float, default=30.0)
    ap.add_argument("--schedule", action="store_true", help="schedule compaction and clean on every table")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="hoodied-bench-poll-") as tmp:
        t0 = time.perf_counter()
        paths = build(Path(tmp), args.tables)
        print(f"built {len(paths)} tables in {time.perf_counter() - t0:.1f} s (untimed)")
        tables = "\n".join(f"  - {p}" for p in paths)
        schedule = (
            "reschedule_interval: 0s\ndefaults: {schedule: [compaction, clean]}\n" if args.schedule else ""
        )
        config = DaemonConfig.parse(
            f"metrics: {{port: null}}\npoll_interval: {args.poll_interval}s\n{schedule}tables:\n{tables}\n"
        )
        metrics = Metrics(replica="bench")
        heartbeats = Heartbeats(started_at=time.time())
        supervisor = Supervisor(
            config,
            EmbeddedCoordination(metrics),
            metrics,
            heartbeats,
            _no_spark,  # type: ignore[arg-type]
        )
        with (
            HealthServer(metrics, heartbeats, config.poll_interval) as health,
            HealthProbe(health.url) as probe,
        ):
            cold_w, cold_c = measure(supervisor.poll, 1)
            warm_w, warm_c = measure(supervisor.poll, args.polls)
        assert not any(t.items for t in supervisor.tables()), "the benchmark tables should have nothing to do"

        storages = [Storage.for_uri(str(p)) for p in paths]

        def baseline() -> None:
            for s in storages:
                Table.load(s).timeline.pending()

        base_w, base_c = measure(baseline, args.polls)

    n = args.tables
    ours_w, ours_c = statistics.median(warm_w), statistics.median(warm_c)
    b_w, b_c = statistics.median(base_w), statistics.median(base_c)
    print(f"cold poll: {cold_w[0] * 1000:.0f} ms wall, {cold_c[0] * 1000:.0f} ms CPU for {n} tables")
    print(
        f"idle poll (median of {args.polls}): {ours_w * 1000:.1f} ms wall, {ours_c * 1000:.1f} ms CPU; "
        f"per table {ours_w / n * 1e6:.0f} us wall, {ours_c / n * 1e6:.0f} us CPU"
    )
    print(
        f"CPU share at a {args.poll_interval:.0f} s poll interval: {ours_c / args.poll_interval * 100:.3f} % "
        "of one core"
    )
    print(
        f"baseline Table.load of every table (median of {args.polls}): {b_w * 1000:.1f} ms wall, "
        f"{b_c * 1000:.1f} ms CPU; per table {b_w / n * 1e6:.0f} us"
    )
    print(f"ratio idle poll / baseline: wall {ours_w / b_w:.2f}, CPU {ours_c / b_c:.2f}")
    holds = _histogram(metrics, "hoodied_lock_hold_seconds")
    polls = 1 + args.polls
    print(
        f"table lock: taken {holds[0]:.0f} times over {polls} polls of {n} tables "
        f"({holds[0] / (polls * n):.3f} per table per poll), held {holds[1] * 1000:.1f} ms in all"
    )
    print(
        f"/healthz during the polls: {probe.asked} asks, {probe.green} green, {probe.asked - probe.green} not"
        + (f" (first not green: {probe.first_failure})" if probe.first_failure else "")
    )
    return 0 if probe.asked == probe.green else 1


def _histogram(metrics: Metrics, name: str) -> tuple[float, float]:
    """(count, sum) of a histogram without labels."""
    count = metrics.registry.get_sample_value(f"{name}_count") or 0.0
    total = metrics.registry.get_sample_value(f"{name}_sum") or 0.0
    return count, total


class HealthProbe:
    """Asks ``/healthz`` every 50 ms from a thread of its own while the block runs."""

    def __init__(self, url: str) -> None:
        self.url = f"{url}/healthz"
        self.asked = self.green = 0
        self.first_failure: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.asked += 1
            try:
                with urllib.request.urlopen(self.url, timeout=5) as reply:
                    ok = reply.status == 200
                    body = reply.read().decode()
            except Exception as e:  # a 503 raises HTTPError
                ok, body = False, str(e)
            if ok:
                self.green += 1
            elif self.first_failure is None:
                self.first_failure = body

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


if __name__ == "__main__":
    sys.exit(main())
