"""Small plans: on the driver's threads or as a Spark job? The measurement behind driver_max_bytes.

    python benchmarks/bench_job_sizing.py [--rows 2000 20000 100000 400000] [--file-groups 4] [--repeat 3]

For each size, a MERGE_ON_READ table (version 8, trips rows of ``hoodie.testing.generate``, FILE_GROUPS
partitions of one file group, one upsert of 20 % of the rows) with one compaction scheduled; every run
compacts a fresh copy through ``hoodied.jobs.run_service_job`` (the daemon's job runner) in one process with
a warm ``local[2]`` session, alternating:

- driver: ``SizingSettings(driver_max_bytes=2**62)``: the tasks on the driver's threads;
- spark: ``SizingSettings(driver_max_bytes=0)``: one Spark task per file group.

Printed per size: the plan's bytes, the medians, and spark / driver. Where the ratio is above 1 the driver is
faster: ``driver_max_bytes`` belongs at the largest plan size where it still is.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "core"), str(ROOT / "services")]

from hoodie.compaction.plan import schedule_compaction  # noqa: E402
from hoodie.compaction.service import COMPACTION  # noqa: E402
from hoodie.lock import FileSystemLock  # noqa: E402
from hoodie.storage import Storage  # noqa: E402
from hoodie.testing.generate import GenerateSpec, generate_table  # noqa: E402
from hoodied.job_sizing import SizingSettings  # noqa: E402
from hoodied.jobs import run_service_job  # noqa: E402
from hoodied.spark import SparkConfig, spark_session  # noqa: E402

IN_DRIVER = SizingSettings(driver_max_bytes=2**62)
ON_SPARK = SizingSettings(driver_max_bytes=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[2000, 20000, 100000, 400000])
    ap.add_argument("--file-groups", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-job-sizing-"))
    spark = spark_session(SparkConfig(master="local[2]"))
    spark.sparkContext.parallelize([0, 1], 2).map(lambda x: x).collect()  # Python workers up
    print(f"{'rows':>8s} {'plan MiB':>9s} {'driver s':>9s} {'spark s':>8s} {'spark/driver':>13s}")
    try:
        for rows in args.rows:
            table = work / f"t{rows}"
            generate_table(
                str(table),
                GenerateSpec(
                    table_version=8,
                    rows=rows,
                    commits=2,
                    partitions=args.file_groups,
                    update_fraction=0.2,
                    delete_fraction=0.0,
                    seed=3,
                ),
            )
            storage = Storage.for_uri(str(table))
            if schedule_compaction(storage, FileSystemLock(storage)).plan is None:
                raise SystemExit(f"{rows} rows: nothing to compact")
            times: dict[str, list[float]] = {"driver": [], "spark": []}
            plan_bytes = 0
            for i in range(args.repeat):
                for name, sizing in (("driver", IN_DRIVER), ("spark", ON_SPARK)):
                    copy = work / f"run-{rows}-{name}-{i}"
                    shutil.copytree(table, copy)
                    s = Storage.for_uri(str(copy))
                    started = time.monotonic()
                    run = run_service_job(spark, COMPACTION, s, FileSystemLock(s), sizing=sizing)
                    times[name].append(time.monotonic() - started)
                    assert run.on_executors == (name == "spark")
                    plan_bytes = run.size.input_bytes
                    shutil.rmtree(copy)
            d, sp = statistics.median(times["driver"]), statistics.median(times["spark"])
            print(f"{rows:8d} {plan_bytes / 2**20:9.1f} {d:9.2f} {sp:8.2f} {sp / d:13.2f}", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
