"""What an aged timeline costs, and what archival gives back: a table with many commits, before and after.

    python benchmarks/bench_archival.py [--commits 10000] [--version 8] [--repeat 5]

Builds a COPY_ON_WRITE table with two real commits (our table writer), then gives it ``--commits`` completed
commits in all by copying the last commit's three timeline files under new, increasing instant times (build
untimed; writing 10,000 real commits would take the writer's clock-skew wait 10,000 times over, and neither
a poll nor ``Table.load`` reads more than the names). Measured, median of ``--repeat``:

- an idle daemon poll of the table (supervisor, embedded coordination, every timeline listing unchanged)
  and a cold one (timeline parsed);
- ``Table.load`` (config read, timeline listed and parsed) and a snapshot read through it;
- before, then after ``hoodied archive`` with Hudi's default bounds (``hoodie.keep.min.commits`` 20, max 30),
  which is itself timed once (the history written, the files deleted, LSM compaction).

The baseline measured in the same run is the table before archival; printed are the ratios after / before.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hoodie.archival.execute import archive
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.archived.load import load_archived_timeline
from hoodie.timeline.instant import State
from hoodie.timeline.instant_time import format_instant_time, parse_instant_time
from hoodied.config import DaemonConfig
from hoodied.coordination import EmbeddedCoordination
from hoodied.health import Heartbeats
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor


def _no_spark() -> object:
    raise RuntimeError("the archival benchmark runs no jobs")


def build(root: Path, commits: int, version: int) -> None:
    """Two real commits, then copies of the last one's timeline files up to ``commits`` in all."""
    spec = GenerateSpec(table_type="COPY_ON_WRITE", table_version=version, rows=200, commits=2, partitions=2)
    generate_table(str(root), spec)
    table = Table.open(str(root))
    timeline = table.timeline
    last = timeline.completed_writes()[-1]
    files = {
        state.state: (name, table.storage.read(f"{timeline.folder}/{name}"))
        for state, name in timeline.files[last.time]
    }
    folder = root / timeline.folder
    start = parse_instant_time(last.time)
    for i in range(1, commits - 1):
        moment = start + dt.timedelta(milliseconds=2 * i)
        time_ = format_instant_time(moment)
        done = format_instant_time(moment + dt.timedelta(milliseconds=1))
        for state, (name, data) in files.items():
            new = name.replace(last.time, time_, 1)
            if state is State.COMPLETED and last.completion_time:
                new = new.replace(last.completion_time, done, 1)
            (folder / new).write_bytes(data)


def median_of(fn: Callable[[], object], repeat: int) -> float:
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def measure(root: Path, repeat: int) -> dict[str, float]:
    # Archival left out of the measured daemon: it is timed on its own, between the two measurements.
    services = "defaults: {services: [compaction, clustering, clean, indexing]}\n"
    config = DaemonConfig.parse(f"metrics: {{port: null}}\n{services}tables:\n  - {root}\n")
    metrics = Metrics(replica="bench")
    heartbeats = Heartbeats(started_at=time.time())
    supervisor = Supervisor(
        config,
        EmbeddedCoordination(metrics),
        metrics,
        heartbeats,
        _no_spark,  # type: ignore[arg-type]
    )
    t0 = time.perf_counter()
    supervisor.poll()
    cold = time.perf_counter() - t0
    storage = Storage.for_uri(str(root))
    return {
        "cold poll": cold,
        "idle poll": median_of(supervisor.poll, repeat),
        "Table.load": median_of(lambda: Table.load(storage), repeat),
        "snapshot read": median_of(lambda: Table.load(storage).read(), repeat),
        "active instants": float(len(Table.load(storage).timeline)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--version", type=int, choices=[6, 8, 9], default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hoodied-bench-archival-") as tmp:
        root = Path(tmp) / "t"
        t0 = time.perf_counter()
        build(root, args.commits, args.version)
        built = time.perf_counter() - t0
        print(f"built a v{args.version} table with {args.commits} commits in {built:.1f} s (untimed)")
        before = measure(root, args.repeat)
        storage = Storage.for_uri(str(root))
        t0 = time.perf_counter()
        results = archive(storage, FileSystemLock(storage), {})
        took = time.perf_counter() - t0
        moved = sum(len(r.archived) for r in results)
        after = measure(root, args.repeat)
        table = Table.load(storage)
        history = load_archived_timeline(storage, table.config)
        t0 = time.perf_counter()
        load_archived_timeline(storage, table.config)
        read_history = time.perf_counter() - t0
        kept = len(history.completed())
        print(f"archival: {moved} instants moved in {took:.2f} s; the history holds {kept} instants")
        print(f"reading the whole history: {read_history * 1000:.0f} ms")
        print(f"{'':<16} {'before':>12} {'after':>12} {'after/before':>13}")
        for key in before:
            b, a = before[key], after[key]
            if key == "active instants":
                print(f"{key:<16} {b:>12.0f} {a:>12.0f} {a / b:>13.4f}")
            else:
                print(f"{key:<16} {b * 1000:>10.1f}ms {a * 1000:>10.1f}ms {a / b:>13.3f}")
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
