"""What a table on an S3-compatible store costs against the same table on local disk, measured in one run.

    python benchmarks/bench_object_store.py [--rows 200000] [--tables 100] [--repeat 3]

Starts moto's S3 server on 127.0.0.1 (the test suite's; a Python server, so its times are an upper bound of
what S3 itself costs), builds one MOR table (version 8, ``rows`` rows, four upserts of 10 %), and measures:

- compaction of the whole table in this process (``compact_in_process``: plan, merge, write, commit), median
  of ``repeat`` runs each on a fresh copy, on local disk and on S3, and the ratio S3 / local, with the
  requests the S3 compaction made by kind;
- the daemon's poll over ``tables`` copies of a small table on S3, nothing to do: the wall time and the
  requests per table per idle poll (the target is fewer than 2: a ``TARGET`` line), beside the same poll on
  local disk.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import targets
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import lock_for_table
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodied.config import DaemonConfig
from hoodied.coordination import EmbeddedCoordination
from hoodied.health import Heartbeats
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor
from support.s3_server import S3Server

TARGET_REQUESTS = 2.0  # requests per table per idle poll on S3, strictly fewer


def _compact(uri: str) -> tuple[float, dict[str, int]]:
    storage = Storage.for_uri(uri)
    lock = lock_for_table(storage, {})
    assert schedule_compaction(storage, lock).instant is not None
    started = time.perf_counter()
    compact_in_process(storage, lock)
    return time.perf_counter() - started, storage.requests.snapshot()


def _poll(uris: list[str], polls: int) -> tuple[float, dict[str, int]]:
    tables = "\n".join(f"  - {u}" for u in uris)
    config = DaemonConfig.parse(f"metrics: {{port: null}}\ntables:\n{tables}\n")
    metrics = Metrics(replica="bench")
    supervisor = Supervisor(
        config,
        EmbeddedCoordination(metrics),
        metrics,
        Heartbeats(started_at=time.time()),
        lambda: None,  # type: ignore[arg-type,return-value]
    )
    supervisor.poll()  # the first poll reads every config and timeline
    before = [t.storage.requests.snapshot() for t in supervisor.tables()]
    started = time.perf_counter()
    for _ in range(polls):
        supervisor.poll()
    wall = (time.perf_counter() - started) / polls
    totals: dict[str, int] = {}
    for table, was in zip(supervisor.tables(), before, strict=True):
        for op, n in table.storage.requests.snapshot().items():
            totals[op] = totals.get(op, 0) + n - was.get(op, 0)
    return wall, totals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--polls", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hoodied-bench-s3-") as tmp_dir:
        tmp = Path(tmp_dir)
        server = S3Server(tmp)
        server.start()
        try:
            import os

            os.environ.update(server.environment())
            server.bucket("bench")
            template = tmp / "template"
            spec = GenerateSpec(table_version=8, rows=args.rows, commits=5, partitions=4, update_fraction=0.1)
            generate_table(str(template), spec)
            local_times, s3_times = [], []
            s3_requests: dict[str, int] = {}
            for i in range(args.repeat):
                local = tmp / f"local{i}"
                shutil.copytree(template, local)
                local_times.append(_compact(str(local))[0])
                uri = server.upload(template, f"s3://bench/compact{i}")
                seconds, s3_requests = _compact(uri)
                s3_times.append(seconds)
            loc, s3 = statistics.median(local_times), statistics.median(s3_times)
            print(f"compaction of {args.rows} rows + 4 upserts (median of {args.repeat}):")
            print(f"  local disk {loc:.2f} s, S3 (moto) {s3:.2f} s: ratio {s3 / loc:.2f}")
            print(f"  S3 requests of one compaction: {dict(sorted(s3_requests.items()))}")

            small = tmp / "small"
            generate_table(
                str(small), GenerateSpec(table_version=8, rows=20, commits=2, partitions=1, seed=3)
            )
            uris = [server.upload(small, f"s3://bench/poll/t{i:04d}") for i in range(args.tables)]
            locals_ = []
            for i in range(args.tables):
                target = tmp / "poll" / f"t{i:04d}"
                shutil.copytree(small, target)
                locals_.append(str(target))
            for name, tables in (("local disk", locals_), ("S3 (moto)", uris)):
                wall, requests = _poll(tables, args.polls)
                per_table = sum(requests.values()) / args.polls / args.tables
                print(
                    f"idle poll of {args.tables} tables on {name}: {wall * 1000:.0f} ms, "
                    f"{per_table:.2f} requests per table per poll {dict(sorted(requests.items()))}"
                )
                if tables is uris:
                    targets.check(
                        "S3 requests per table per idle poll",
                        per_table,
                        TARGET_REQUESTS,
                        unit="",
                        strict=True,
                    )
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
