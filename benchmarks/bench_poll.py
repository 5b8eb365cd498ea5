"""What one replica pays to watch many tables that have nothing to do.

    python benchmarks/bench_poll.py [--tables 200] [--polls 10] [--poll-interval 30]

Builds TABLES small MOR tables (version 8, two commits each, nothing pending; build untimed), then runs the
supervisor's poll over all of them (embedded coordination, no scheduling configured, no Spark) POLLS times.
The first poll is cold (every table's config read and timeline parsed); the later ones find every timeline
listing unchanged. Printed per poll: wall time, CPU time (this process), and per table; the CPU share of
one core at the given poll interval; and, as the baseline measured in the same run, the cost of what a
poller without the listing cache would do: ``Table.load`` of every table (config read + timeline listed and
parsed) and a pending-instant scan, with the ratio ours / baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.write.generate import GenerateSpec, generate_table
from hoodied.config import DaemonConfig
from hoodied.coordination import EmbeddedCoordination
from hoodied.health import Heartbeats
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor


def _no_spark() -> object:
    raise RuntimeError("the poll benchmark runs no jobs")


def build(root: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        path = root / f"t{i:04d}"
        spec = GenerateSpec(table_version=8, rows=20, commits=2, partitions=1, seed=i, update_fraction=0.5)
        generate_table(str(path), spec)
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
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="hoodied-bench-poll-") as tmp:
        t0 = time.perf_counter()
        paths = build(Path(tmp), args.tables)
        print(f"built {len(paths)} tables in {time.perf_counter() - t0:.1f} s (untimed)")
        tables = "\n".join(f"  - {p}" for p in paths)
        config = DaemonConfig.parse(f"metrics: {{port: null}}\ntables:\n{tables}\n")
        metrics = Metrics(replica="bench")
        supervisor = Supervisor(
            config,
            EmbeddedCoordination(metrics.observe_lock_wait),
            metrics,
            Heartbeats(started_at=time.time()),
            _no_spark,  # type: ignore[arg-type]
        )
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
