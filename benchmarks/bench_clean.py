"""What a clean of many files costs, per 1,000 files, on local disk and on an S3-compatible store: its deletes
one at a time (the baseline, measured in the same run) against ``hoodie.clean.hoodied.delete.concurrency``'s
default bound (16).

    python benchmarks/bench_clean.py [--files 100000] [--s3-files 5000] [--store local,s3] [--latency-ms 10]
                                     [--concurrency 16] [--repeat 3]

The table (built untimed; a fresh copy for every measured clean): a COPY_ON_WRITE table (version 8, ten
partitions, no metadata table) with two real commits written by ``hoodie.testing.generate``, then nine more
completed commits made by copying the last commit's timeline files under later instant times (writing them
for real would take the writer's clock-skew wait each time, and a clean reads no commit's contents). Beside
the real file groups, enough file groups holding one slice per commit (eleven) for the clean to delete
``--files`` files: their base files are small files (100 bytes, not Parquet) named as Hudi names base files
(``<file id>_<token>_<instant>.parquet``). That is the shortcut: a clean never opens the files it deletes;
only their names and sizes count. What is real: the plan is scheduled by ``schedule_clean``
(``KEEP_LATEST_FILE_VERSIONS``, one version kept) from a listing of the table, so it names every slice but
each group's latest (the added groups' and the real ones'), and the clean is Hudi's ``clean`` action as
hoodied runs it.

Measured: ``clean_in_process`` with the bound at 1 and at ``--concurrency``, each on a fresh copy: the clean
going inflight (its plan read), every file looked at and deleted (on S3 a HEAD a file, and the files found
1000 to a ``DeleteObjects``), and the commit (``HoodieCleanMetadata`` naming every file). Each run is checked:
every planned file gone, the clean completed and counting them all. On local disk each is run ``--repeat``
times, alternating which goes first, and the medians compared (a local clean's time swings with what else
the machine's disk and CPUs are doing); on S3 each runs once (a fresh copy costs a PUT a file). Printed:
seconds per 1,000 files of each, the ratio bounded / one at a time, and the requests the store received.

The S3 store is moto's server on 127.0.0.1 (the test suite's), started on a free port and stopped by its PID.
It is a Python server: a request costs it a few milliseconds of CPU and no network, on the same 2 cores as
the client, so one at a time a clean waits on moto's CPU, and concurrency can gain no more than moto's one
busy core allows. S3 itself answers from many machines across a network round trip, which is what the bound
overlaps; so the clean is measured again through the test suite's fault proxy (its ``slow`` fault, in a
process of its own, killed by its PID), which holds every request ``--latency-ms`` (10 ms, the low end of
S3's round trip within a region) before moto serves it. Building a table there costs a PUT a file, so S3
runs on ``--s3-files`` (5,000 unless given), which keeps the S3 part within about five minutes on 2 cores.

Targets (``TARGET`` lines, ``targets.py``):

- S3 with the round trip, bounded / one at a time <= 0.5. One at a time a file costs the round trip plus
  moto's CPU (some 5 ms a request); 16 in flight hide the round trips, but no run can go faster than moto
  serves requests on its one core, so about 0.3 is the best this machine can show; half leaves room for a
  busy machine. (Against S3 itself, with tens of milliseconds a round trip and no server CPU in the way,
  the gain is larger.)
- S3 (moto on loopback), bounded / one at a time <= 1.1: there is no round trip to hide and moto's CPU is
  the bottleneck, so the bound can gain little (0.4 to 1.0 measured, as busy as the machine was); it must
  not cost.
- local disk, bounded, seconds per 1,000 files <= 0.5 (a clean of 100,000 files within a minute), and
  bounded / one at a time <= 1.2: an unlink is a system call of some 10 microseconds, not a round trip, so
  the bound buys little on a quiet disk and must not cost much (threads and the GIL). On a disk busy with
  other writers an unlink waits on the journal for milliseconds, and the bound then hides those waits as it
  hides round trips (one at a time was up to 20 times slower in such runs); each copy is synced before its
  clean, so that a run does not pay for writing back its own copy.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import targets
from hoodie.clean.execute import DELETE_CONCURRENCY_DEFAULT, clean_in_process, plan_files
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.file_group.base_file import BaseFile
from hoodie.lock import lock_for_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodie.timeline.instant_time import format_instant_time, parse_instant_time
from support.s3_faults import FaultControl
from support.s3_server import S3Server

TESTS = Path(__file__).resolve().parents[1] / "tests"
#: Slices of each added file group (one a completed commit): the clean deletes all but the latest.
SLICES = 11
FILE_BYTES = 100
PARTITIONS = 10
#: Files the building thread pool writes to the store at a time.
UPLOAD_THREADS = 16
CLEAN_CONFIG = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
S3_FILES_DEFAULT = 5_000


@dataclasses.dataclass(frozen=True)
class Run:
    """One measured clean."""

    concurrency: int
    files: int
    seconds: float
    requests: dict[str, int]

    @property
    def per_thousand(self) -> float:
        return self.seconds / self.files * 1000


def build_template(root: Path, files: int) -> None:
    """The table of the module doc, without its clean: real commits, copied commits, the added groups."""
    spec = GenerateSpec(
        table_type="COPY_ON_WRITE", table_version=8, rows=200, commits=2, partitions=PARTITIONS, seed=3
    )
    generate_table(str(root), spec)
    table = Table.open(str(root))
    timeline = table.timeline
    last = timeline.completed_writes()[-1]
    copied = {
        state: (name, table.storage.read(f"{timeline.folder}/{name}"))
        for state, name in timeline.files[last.time]
    }
    times = [w.time for w in timeline.completed_writes()]
    start = parse_instant_time(last.time)
    for i in range(1, SLICES - len(times) + 1):
        moment = start + dt.timedelta(milliseconds=2 * i)
        done = format_instant_time(moment + dt.timedelta(milliseconds=1))
        t = format_instant_time(moment)
        for state, (name, data) in copied.items():
            new = name.replace(last.time, t, 1)
            if state is State.COMPLETED and last.completion_time:
                new = new.replace(last.completion_time, done, 1)
            (root / timeline.folder / new).write_bytes(data)
        times.append(t)
    partitions = sorted({g.partition_path for g in table.file_groups()})
    body = b"x" * FILE_BYTES
    for g in range(-(-files // (SLICES - 1))):
        partition = root / partitions[g % len(partitions)]
        file_id = f"{uuid.UUID(int=g + 1)}-0"
        for t in times:
            (partition / BaseFile(file_id, "0-0-0", t).file_name).write_bytes(body)
    time.sleep(0.1)  # the copied commits' times run a few milliseconds ahead of the clock at most


def upload(template: Path, uri: str) -> None:
    """Every file of ``template`` to ``uri``, plain PUTs on a thread pool."""
    storage = Storage.for_uri(uri)
    paths = [p for p in template.rglob("*") if p.is_file()]

    def put(path: Path) -> None:
        storage.create(path.relative_to(template).as_posix(), path.read_bytes(), overwrite=True)

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        list(pool.map(put, paths))


def measure(uri: str, concurrency: int, options: Mapping[str, str] | None = None) -> Run:
    """Schedule the clean on the fresh table at ``uri`` (untimed), time it through a storage opened with
    ``options`` (the latency proxy's endpoint), and check what it did."""
    direct = Storage.for_uri(uri)
    scheduled = schedule_clean(direct, lock_for_table(direct, {}), config=CLEAN_CONFIG)
    if scheduled.instant is None or scheduled.plan is None:
        raise RuntimeError(f"no clean scheduled on {uri}: {scheduled.reason}")
    planned = [p for ps in plan_files(scheduled.plan).values() for p in ps]
    storage = Storage.for_uri(uri, options)
    lock = lock_for_table(storage, {})
    before = storage.requests.snapshot()
    started = time.perf_counter()
    result = clean_in_process(storage, lock, scheduled.instant.time, concurrency=concurrency)
    seconds = time.perf_counter() - started
    after = storage.requests.snapshot()
    if result.files_deleted != len(planned) or result.failed:
        raise RuntimeError(
            f"{uri}: {result.files_deleted} of {len(planned)} deleted, {len(result.failed)} failed"
        )
    done = Table.load(direct).timeline.get(scheduled.instant.time)
    if done is None or done.state is not State.COMPLETED:
        raise RuntimeError(f"{uri}: clean {scheduled.instant.time} is {done or 'gone'}, not completed")
    left = {f.path for f in direct.list("", recursive=True)} & set(planned)
    if left:
        raise RuntimeError(f"{uri}: {len(left)} planned file(s) left, e.g. {sorted(left)[0]}")
    requests = {k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] > before.get(k, 0)}
    return Run(concurrency, len(planned), seconds, requests)


def compare(
    name: str,
    fresh: Callable[[str], str],
    bound: int,
    repeat: int,
    options: Mapping[str, str] | None = None,
) -> tuple[Run, Run]:
    """Cleans one at a time and ``bound`` at a time, ``repeat`` times each, alternating which goes first, each
    on a fresh copy (``fresh(label)``); the median run of each."""
    runs: dict[int, list[Run]] = {1: [], bound: []}
    for r in range(repeat):
        for concurrency in (1, bound) if r % 2 == 0 else (bound, 1):
            run = measure(fresh(f"c{concurrency}-{r}"), concurrency, options)
            print(
                f"  {name}, {run.files:,} files, {concurrency:>2} at a time: {run.seconds:7.2f} s, "
                f"{run.per_thousand:.3f} s per 1,000 files; requests {run.requests}",
                flush=True,
            )
            runs[concurrency].append(run)
    sequential, bounded = (
        sorted(runs[c], key=lambda run: run.seconds)[(repeat - 1) // 2] for c in (1, bound)
    )
    runs_of = f"median of {repeat}" if repeat > 1 else "one run each"
    print(
        f"  {name}, {runs_of}: one at a time {sequential.per_thousand:.3f} s per 1,000 files, "
        f"{bound} at a time {bounded.per_thousand:.3f} s; ratio {bounded.seconds / sequential.seconds:.2f}",
        flush=True,
    )
    return sequential, bounded


@contextlib.contextmanager
def latency_proxy(upstream: str, seconds: float) -> Iterator[str]:
    """The test suite's fault proxy in front of ``upstream`` holding every request ``seconds`` (its ``slow``
    fault), in a process of its own so that its CPU is not the client's; killed by its PID after. Yields its
    endpoint."""
    command = [sys.executable, str(TESTS / "support" / "s3_faults.py"), "--upstream", upstream]
    proxy = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        if proxy.stdout is None:
            raise RuntimeError("the proxy's output is not piped")
        endpoint = proxy.stdout.readline().strip()
        FaultControl(endpoint).inject(kind="slow", delay=seconds, rate=1.0)
        yield endpoint
    finally:
        proxy.kill()
        proxy.wait()


def run_local(tmp: Path, files: int, bound: int, repeat: int) -> None:
    template = tmp / "local-template"
    t0 = time.perf_counter()
    build_template(template, files)
    print(f"local disk: table built in {time.perf_counter() - t0:.1f} s (untimed)", flush=True)

    def fresh(label: str) -> str:
        for old in tmp.glob("local-c*"):
            shutil.rmtree(old)  # what the last clean left
        target = tmp / f"local-{label}"
        shutil.copytree(template, target)
        os.sync()  # the copy's writeback is not the clean's
        return str(target)

    sequential, bounded = compare("local disk", fresh, bound, repeat)
    shutil.rmtree(template)
    targets.check("clean local disk, s per 1,000 files (bounded)", bounded.per_thousand, 0.5, unit=" s")
    targets.check("clean local disk, bounded / one at a time", bounded.seconds / sequential.seconds, 1.2)


def run_s3(tmp: Path, files: int, bound: int, latency_ms: float) -> None:
    template = tmp / "s3-template"
    build_template(template, files)
    server = S3Server(tmp)
    server.start()
    try:
        os.environ.update(server.environment())
        bucket = server.bucket("bench")

        def fresh(prefix: str) -> Callable[[str], str]:
            def copy(label: str) -> str:
                uri = f"{bucket}/{prefix}-{label}"
                t0 = time.perf_counter()
                upload(template, uri)
                print(f"S3 (moto): table uploaded to {uri} in {time.perf_counter() - t0:.1f} s (untimed)")
                return uri

            return copy

        sequential, bounded = compare("S3 (moto)", fresh("loopback"), bound, 1)
        slow = None
        if latency_ms > 0:
            with latency_proxy(server.endpoint, latency_ms / 1000) as endpoint:
                options = {"endpoint": endpoint, "allow_http": "true"}
                name = f"S3 (moto, +{latency_ms:g} ms a request)"
                slow = compare(name, fresh("slow"), bound, 1, options)
    finally:
        server.stop()
    if slow is not None:
        targets.check(
            f"clean S3 (moto, +{latency_ms:g} ms a request), bounded / one at a time",
            slow[1].seconds / slow[0].seconds,
            0.5,
        )
    targets.check(
        "clean S3 (moto on loopback), bounded / one at a time", bounded.seconds / sequential.seconds, 1.1
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=100_000, help="files the clean deletes on local disk")
    ap.add_argument(
        "--s3-files", type=int, default=None, help=f"on S3 (default: {S3_FILES_DEFAULT:,} at most)"
    )
    ap.add_argument("--store", default="local,s3", help="comma-separated: local, s3")
    ap.add_argument("--latency-ms", type=float, default=10.0, help="the S3 round trip added (0: no such run)")
    ap.add_argument("--concurrency", type=int, default=DELETE_CONCURRENCY_DEFAULT)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each on local disk (medians)")
    args = ap.parse_args(argv)
    stores = [s.strip() for s in args.store.split(",") if s.strip()]
    unknown = set(stores) - {"local", "s3"}
    if unknown:
        ap.error(f"--store: unknown {', '.join(sorted(unknown))} (local, s3)")
    s3_files = args.s3_files if args.s3_files is not None else min(args.files, S3_FILES_DEFAULT)
    print(f"clean: one at a time against {args.concurrency} at a time ({os.cpu_count()} CPUs)", flush=True)
    with tempfile.TemporaryDirectory(prefix="hoodied-bench-clean-") as tmp_dir:
        tmp = Path(tmp_dir)
        if "local" in stores:
            run_local(tmp, args.files, args.concurrency, args.repeat)
        if "s3" in stores:
            if s3_files < args.files:
                print(f"S3: {s3_files:,} files, fewer than the {args.files:,} on local disk (--s3-files)")
            run_s3(tmp, s3_files, args.concurrency, args.latency_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
