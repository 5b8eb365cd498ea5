"""Compaction of a large MERGE_ON_READ table in local mode against a Spark standalone cluster.

    python benchmarks/bench_spark_cluster.py [--rows 10000000] [--file-groups 100] [--update-fraction 0.05]
                                             [--workers 2] [--worker-cores 1] [--repeat 1]

The table: ROWS trip rows (``hoodie.testing.generate``, version 8) in FILE_GROUPS partitions of one file
group each, then one upsert of UPDATE_FRACTION of the rows, so every file group has a log file; one
compaction is scheduled (one operation per file group). It is built once (its build time printed); every run
compacts a fresh copy (``shutil.copytree``, untimed).

Two ways to run the same job, each in a fresh driver process (``hoodied.jobs.run_service_job``, the daemon's
job runner):

- ``local[2]``: the driver's own JVM with two task slots, Python workers on this machine's two cores;
- the cluster: a Master and WORKERS Workers of WORKER_CORES cores each, each its own JVM started with
  pyspark's ``spark-class`` on 127.0.0.1 (``tests/support/spark_cluster.py``), executors running a Python
  without hoodied installed, so the code travels with the job (``spark.ship_code``); the cluster is started
  before the clock (its start time printed).

Printed per run: wall time of the job (prepare, tasks, commit), tasks, bytes read by the plan and written,
and the driver's peak memory (the Python driver's and its JVM's peak RSS, ``VmHWM``). The ratio
cluster / local is printed; both must leave hudi-rs reading the rows it read before (checked once).
On a 2-core machine the cluster's executors compete with the driver for the same cores: the figure shows the
cost of the cluster round trip (task serialization, shipped code, remote Python workers), not a speed-up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "core"), str(ROOT / "services"), str(ROOT / "tests")]

from hoodie.compaction.plan import schedule_compaction  # noqa: E402
from hoodie.lock import FileSystemLock  # noqa: E402
from hoodie.storage import Storage  # noqa: E402
from hoodie.testing.generate import GenerateSpec, generate_table  # noqa: E402
from support.spark_cluster import StandaloneCluster, executor_python  # noqa: E402

DRIVER = textwrap.dedent(
    """
    import json, os, sys, time
    from hoodie.compaction.service import COMPACTION
    from hoodie.lock import FileSystemLock
    from hoodie.storage import Storage
    from hoodied.jobs import run_service_job
    from hoodied.spark import SparkConfig, spark_session

    master, conf, root = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    spark = spark_session(SparkConfig(master=master, conf=conf))
    spark.sparkContext.parallelize([0, 1], 2).map(lambda x: x).collect()  # executors up before the clock
    storage = Storage.for_uri(root)
    started = time.monotonic()
    run = run_service_job(spark, COMPACTION, storage, FileSystemLock(storage))
    seconds = time.monotonic() - started

    def hwm(pid):
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    children = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            stat = open(f"/proc/{p}/stat").read()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and "java" in open(f"/proc/{p}/cmdline").read():
                children.append(int(p))
        except OSError:
            pass
    print(json.dumps({
        "seconds": seconds,
        "tasks": run.tasks,
        "on_executors": run.on_executors,
        "size": run.size.describe(),
        "input_bytes": run.size.input_bytes,
        "records": run.done.records,
        "bytes_written": run.done.bytes_written,
        "driver_python_peak": hwm(os.getpid()),
        "driver_jvm_peak": sum(hwm(c) for c in children),
    }))
    spark.stop()
    """
)


def build(root: Path, rows: int, file_groups: int, update_fraction: float) -> None:
    generate_table(
        str(root),
        GenerateSpec(
            table_version=8,
            rows=rows,
            commits=2,
            partitions=file_groups,
            update_fraction=update_fraction,
            delete_fraction=0.0,
            seed=7,
        ),
    )
    storage = Storage.for_uri(str(root))
    scheduled = schedule_compaction(storage, FileSystemLock(storage))
    if scheduled.plan is None:
        raise SystemExit(f"nothing to compact: {scheduled.reason}")
    print(f"plan: {len(scheduled.plan.operations)} operation(s)", flush=True)


def run(master: str, conf: dict[str, str], table: Path, work: Path) -> dict[str, object]:
    copy = work / f"run-{time.monotonic_ns()}"
    shutil.copytree(table, copy)
    env = dict(
        os.environ, PYTHONPATH=f"{ROOT / 'core'}{os.pathsep}{ROOT / 'services'}", SPARK_LOCAL_IP="127.0.0.1"
    )
    env.pop("PYSPARK_PYTHON", None)
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, master, json.dumps(conf), str(copy)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{master}: {out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    result["table"] = str(copy)
    return result


def check_with_hudi_rs(before: Path, after: Path) -> str:
    try:
        from hudi import HudiTableBuilder
    except ImportError:
        return "hudi-rs not installed: not checked"
    import pyarrow as pa

    def read(p: Path) -> pa.Table:
        t = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(p)).build().read())
        return t.select(["uuid", "fare", "ts"]).sort_by("uuid")

    a, b = read(before), read(after)
    return "hudi-rs reads the same rows" if a.equals(b) else "hudi-rs READS OTHER ROWS"


def _mib(value: str) -> str:
    return f"{int(value) / (1024 * 1024):.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--file-groups", type=int, default=100)
    ap.add_argument("--update-fraction", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=1)
    ap.add_argument("--worker-memory", default="4g")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--work", default=None, help="a folder for the table and the cluster (default: a temp dir)"
    )
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-spark-cluster-"))
    table = work / "table"
    started = time.monotonic()
    if not table.exists():
        build(table, args.rows, args.file_groups, args.update_fraction)
    took = time.monotonic() - started
    print(f"table: {args.rows} rows, {args.file_groups} file groups, built in {took:.0f} s")
    python = executor_python(work / "executor-python")
    started = time.monotonic()
    cluster = StandaloneCluster(
        work / "cluster", workers=args.workers, cores=args.worker_cores, memory=args.worker_memory
    ).start()
    took = time.monotonic() - started
    print(f"cluster: {args.workers} worker(s) x {args.worker_cores} core(s), up in {took:.1f} s")
    base = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    variants = {
        "local[2]": ("local[2]", base),
        "cluster": (
            cluster.master_url,
            {**base, "spark.pyspark.python": str(python), "spark.executor.memory": "2g"},
        ),
    }
    results: dict[str, list[dict[str, object]]] = {name: [] for name in variants}
    try:
        for _ in range(args.repeat):
            for name, (master, conf) in variants.items():
                r = run(master, conf, table, work)
                results[name].append(r)
                print(f"{name:9s} {json.dumps({k: v for k, v in r.items() if k != 'table'})}", flush=True)
    finally:
        cluster.stop()
    print(check_with_hudi_rs(table, Path(str(results["cluster"][0]["table"]))))
    med = {name: statistics.median(float(r["seconds"]) for r in rs) for name, rs in results.items()}  # type: ignore[arg-type]
    for name, rs in results.items():
        r = {k: str(v) for k, v in rs[0].items()}
        print(
            f"{name:9s} {med[name]:7.1f} s  {r['tasks']} tasks  {_mib(r['input_bytes'])} MiB planned  "
            f"{_mib(r['bytes_written'])} MiB written  driver peak: "
            f"Python {_mib(r['driver_python_peak'])} MiB, JVM {_mib(r['driver_jvm_peak'])} MiB"
        )
    print(f"cluster / local[2] = {med['cluster'] / med['local[2]']:.2f}")


if __name__ == "__main__":
    main()
