"""What one replica pays to watch a fleet of idle tables, and how soon it starts what appears on one of them.

    python benchmarks/bench_poll.py [--tables 10000] [--store local,s3] [--polls 5] [--poll-interval 30]
                                    [--loop-polls 2] [--trials 3] [--schedule] [--werkzeug] [--profile DIR]

The fleet: TABLES copies of one small MOR table (version 8: two deltacommits, a compaction, one more
deltacommit: 15 files on its timeline), built untimed: on local disk as hard links, on S3 in moto's server
(``fleet_s3.py``: its backend filled directly, 100 tables a bucket, connections kept open as S3 keeps them;
``--werkzeug``: a connection a request, as ``moto_server`` serves). An idle table is one nobody wrote in the
last seconds (``hoodied.listing.QUIET_FOLDER_AGE``). One replica watches them as ``hoodied run`` does (the
supervisor, the embedded coordination, the control documents in files; every service run, none scheduled
unless ``--schedule``), without Spark: a job runs on the driver's threads.

Per store:

1. Polls called one after another on a clock that moves one interval a poll: a cold poll, POLLS idle ones,
   then the poll a reschedule interval later (scheduling re-evaluated on every table, local folders listed
   again). Per idle poll (median): wall time, CPU time of this process, and storage requests, counted by
   the storage backends (each backend call that touches the file system or the store: ``Storage.requests``)
   plus the control store's reads (a listing of its folder, a read a document), and on S3 also as the server
   received them. Over the polls of one reschedule interval (the idle ones and the later one): the CPU share
   of one core and the requests per table per poll. Baselines in the same run, on up to 500 of the tables:
   ``Table.load`` (what a poll without the listing cache pays a table) and the floor (the one request an
   idle table costs, alone: a stat of its timeline folder, its listing on S3), with the ratios.
2. The daemon's loop (``hoodied.daemon.start_polling``, the real interval), its workers and health server:
   the CPU share of this process over LOOP_POLLS idle intervals, ``/healthz`` asked every 0.5 s (all green?).
   Then TRIALS times a table taken at random is watched until the daemon has polled it, and a compaction is
   requested on it at once (``schedule_compaction``, as ``hoodied compact --mode schedule``): the start
   latency runs from the requested file written to the runner starting the job (its ``running`` log line:
   the claim taken, the table re-read; the compaction then runs on the driver). Written just after the
   table's poll, each waits a whole interval: the worst case.

Targets per store (``TARGET`` lines, ``targets.py``): a CPU share below 10 % of one core (the larger of the
two), fewer than 2 requests per table per poll (on S3 the larger of the two counts), the slowest start
within the poll interval + 1 s. ``--profile DIR``: one more idle poll under cProfile, its stats in
``DIR/poll-<store>.prof``, its top functions printed.

On two busy cores the defaults take about 7 minutes on local disk and over half an hour on S3, most of it
moto's server answering (about a hundred listings a second there: a poll of 10,000 tables takes it nearly
two minutes); ``--tables 2000 --store s3`` about 8 minutes.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import targets
from fleet_s3 import FleetS3
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import lock_for_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter, WriteConfig
from hoodie.write.base_file import ParquetOptions
from hoodied.config import DaemonConfig
from hoodied.control import FileControlStore, TableControl
from hoodied.coordination import EmbeddedCoordination
from hoodied.daemon import start_polling
from hoodied.health import HealthServer, Heartbeats
from hoodied.listing import QUIET_FOLDER_AGE
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor
from hoodied.work import WatchedTable

STORES = ("local", "s3")
CPU_SHARE_LIMIT = 10.0  # % of one core
REQUESTS_LIMIT = 2.0  # per table per idle poll
LATENCY_SLACK = 1.0  # seconds over the poll interval
BASELINE_TABLES = 500


# -- the fleet ---------------------------------------------------------------------------------------------


def build_template(path: Path) -> None:
    """A small MOR table as a fleet's idle table looks: writes, a compaction, a write since (so that a
    compaction can be requested on it), small files (a bloom filter for 100 keys, not 60,000)."""
    config = WriteConfig(parquet=ParquetOptions(bloom_num_entries=100))
    spec = GenerateSpec(table_version=8, rows=20, commits=2, partitions=1, seed=1, update_fraction=0.5)
    generate_table(str(path), spec, config)
    storage = Storage.for_uri(str(path))
    lock = lock_for_table(storage, {})
    schedule_compaction(storage, lock)
    compact_in_process(storage, lock, parquet=config.parquet)
    gen = TripGenerator(spec.seed, spec.partitions)  # the seed's first keys are the table's
    TableWriter.open(str(path), config=config).upsert(gen.rows(gen.keys(spec.rows)[:5]))


def local_fleet(root: Path, template: Path, n: int) -> list[str]:
    """``n`` copies of ``template`` under ``root``, their files hard links (nothing rewrites a file in
    place), their folders' times the template's."""
    uris = []
    for i in range(n):
        path = root / f"t{i:05d}"
        shutil.copytree(template, path, copy_function=os.link)
        uris.append(str(path))
    return uris


# -- what a poll costs ------------------------------------------------------------------------------------


class CountedControlStore(FileControlStore):
    """The embedded mode's control store, its reads counted as requests: a listing of its folder, a read a
    document."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.requests: Counter[str] = Counter()

    def read_all(self) -> dict[str, TableControl]:
        found = super().read_all()
        self.requests["LIST"] += 1
        self.requests["GET"] += len(found)
        return found


class ShiftedClock:
    """The monotonic clock plus a shift the benchmark moves, so that polls called back to back see the
    interval pass between them."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.shift


@dataclass(frozen=True)
class PollCost:
    wall: float
    cpu: float
    requests: Counter[str]  # counted by the backends and the control store
    received: Counter[str]  # as the S3 server received them (empty on local disk)


def _requests(supervisor: Supervisor, control: CountedControlStore) -> Counter[str]:
    total = Counter(control.requests)
    for table in supervisor.tables():
        total.update(table.storage.requests.snapshot())
    return total


def _polled(
    supervisor: Supervisor, control: CountedControlStore, server: FleetS3 | None, poll: Callable[[], object]
) -> PollCost:
    before, received = _requests(supervisor, control), Counter(server.requests() if server else {})
    wall, cpu = time.perf_counter(), time.process_time()
    poll()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = Counter(server.requests() if server else {})
    after.subtract(received)
    spent = _requests(supervisor, control)
    spent.subtract(before)
    return PollCost(wall, cpu, +spent, +after)


def _floor(storages: Sequence[Storage], store: str) -> float:
    """CPU seconds a table of the request an idle poll cannot do without: a look at the timeline folder
    (local disk), its listing (S3, ``poll_concurrency`` at once as the poll lists)."""
    folder = ".hoodie/timeline"
    cpu = time.process_time()
    if store == "local":
        for s in storages:
            s.info(folder)
    else:
        with ThreadPoolExecutor(DaemonConfig().poll_concurrency) as pool:
            list(pool.map(lambda s: s.list(folder), storages))
    return (time.process_time() - cpu) / len(storages)


def _no_spark() -> Any:
    """No session: the runner runs a job's tasks on the driver's threads."""
    return None


# -- the start of a requested instant ----------------------------------------------------------------------


class Starts(logging.Handler):
    """When the runner started each job: the time of its ``running <service> <instant> of <table>`` line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.at: dict[tuple[str, str], float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if isinstance(record.msg, str) and record.msg.startswith("running ") and len(args) >= 3:
            self.at[(str(args[2]), str(args[1]))] = record.created


def _trial(
    watched: WatchedTable, storage: Storage, starts: Starts, interval: float
) -> tuple[float, float] | None:
    """Request a compaction on ``watched`` just after the daemon polled it; (seconds from the poll to the
    request written, seconds from then to the job's start), None when the daemon did not poll or start."""
    lock = lock_for_table(storage, {})
    seen = sum(watched.storage.requests.snapshot().values())
    if not _wait(lambda: sum(watched.storage.requests.snapshot().values()) > seen, 3 * interval):
        print(f"  trial on {watched.name}: the daemon did not poll it within {3 * interval:g} s")
        return None
    polled = time.time()
    instant = schedule_compaction(storage, lock).instant
    written = time.time()
    assert instant is not None, "the template has a deltacommit to compact"
    key = (watched.name, instant.time)
    if not _wait(lambda: key in starts.at, 2 * interval + 60, 0.01):
        print(f"  trial on {watched.name}: {instant.time} did not start within {2 * interval + 60:g} s")
        return None
    return written - polled, starts.at[key] - written


def _wait(condition: Callable[[], bool], timeout: float, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


class HealthProbe:
    """Asks ``/healthz`` every ``every`` seconds from a thread of its own while the block runs."""

    def __init__(self, url: str, every: float) -> None:
        self.url = f"{url}/healthz"
        self.every = every
        self.asked = self.green = 0
        self.first_failure: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.asked += 1
            try:
                with urllib.request.urlopen(self.url, timeout=5) as reply:
                    ok, body = reply.status == 200, reply.read().decode()
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


# -- one store ---------------------------------------------------------------------------------------------


def _shown(counts: Counter[str]) -> str:
    return "{" + ", ".join(f"{op}: {n}" for op, n in sorted(counts.items())) + "}"


def _profile(poll: Callable[[], object], path: Path) -> None:
    profile = cProfile.Profile()
    profile.runcall(poll)
    profile.dump_stats(str(path))
    stats = pstats.Stats(str(path))
    print(f"profile of one idle poll ({path}), by own time:")
    stats.sort_stats("tottime").print_stats(15)


def run_store(
    store: str, uris: Sequence[str], work: Path, server: FleetS3 | None, args: argparse.Namespace
) -> bool:
    n, interval = len(uris), args.poll_interval
    tables = "\n".join(f"  - {u}" for u in uris)
    schedule = "reschedule_interval: 0s\ndefaults: {schedule: [compaction, clean]}\n" if args.schedule else ""
    config = DaemonConfig.parse(
        f"metrics: {{port: null}}\npoll_interval: {interval:g}s\nspark: {{fair_pools: false}}\n"
        f"admin: {{state_dir: {work / 'state'}}}\n{schedule}tables:\n{tables}\n"
    )
    metrics = Metrics(replica="bench")
    heartbeats = Heartbeats(started_at=time.time())
    control = CountedControlStore(work / "state")
    clock = ShiftedClock()
    supervisor = Supervisor(
        config, EmbeddedCoordination(metrics), metrics, heartbeats, _no_spark, control=control, clock=clock
    )

    # 1. polls back to back
    cold = _polled(supervisor, control, server, supervisor.poll)
    print(
        f"cold poll: {cold.wall:.1f} s wall, {cold.cpu:.1f} s CPU, {sum(cold.requests.values()) / n:.2f} "
        "requests a table"
    )
    idle = []
    for _ in range(args.polls):
        clock.shift += interval
        idle.append(_polled(supervisor, control, server, supervisor.poll))
    clock.shift += config.reschedule_interval
    resched = _polled(supervisor, control, server, supervisor.poll)
    assert not any(t.items for t in supervisor.tables()), "the fleet's tables should have nothing to do"
    if args.profile:
        clock.shift += interval
        _profile(supervisor.poll, Path(args.profile) / f"poll-{store}.prof")

    wall = statistics.median(p.wall for p in idle)
    cpu = statistics.median(p.cpu for p in idle)
    per_poll = max(idle, key=lambda p: sum(p.requests.values()))
    k = max(1, round(config.reschedule_interval / interval))  # polls of one reschedule interval

    def over_k(idle_figure: float, resched_figure: float) -> float:
        return ((k - 1) * idle_figure + resched_figure) / k

    share = over_k(cpu, resched.cpu) / interval * 100
    counted = over_k(max(sum(p.requests.values()) for p in idle), sum(resched.requests.values())) / n
    received = over_k(max(sum(p.received.values()) for p in idle), sum(resched.received.values())) / n
    print(
        f"idle poll (median of {args.polls}): {wall:.2f} s wall, {cpu:.2f} s CPU; a table "
        f"{wall / n * 1e6:.0f} us wall, {cpu / n * 1e6:.0f} us CPU"
    )
    print(
        f"  requests: counted {_shown(per_poll.requests)}"
        + (f", received {_shown(per_poll.received)}" if server else "")
    )
    print(
        f"the poll a reschedule interval later ({config.reschedule_interval:g} s: scheduling re-evaluated, "
        f"local folders listed again): {resched.wall:.2f} s wall, {resched.cpu:.2f} s CPU, requests: counted "
        f"{_shown(resched.requests)}" + (f", received {_shown(resched.received)}" if server else "")
    )
    print(
        f"over the {k} polls of one reschedule interval ({k - 1} idle, 1 later): CPU share of one core at a "
        f"{interval:g} s poll interval {share:.2f} %; requests a table a poll {counted:.3f} counted"
        + (f", {received:.3f} received by the server" if server else "")
    )

    sample = [Storage.for_uri(u) for u in uris[:BASELINE_TABLES]]
    b_wall, b_cpu = time.perf_counter(), time.process_time()
    for s in sample:
        Table.load(s).timeline.pending()
    b_wall = (time.perf_counter() - b_wall) / len(sample)
    b_cpu = (time.process_time() - b_cpu) / len(sample)
    print(
        f"baseline Table.load ({len(sample)} tables): a table {b_wall * 1e6:.0f} us wall, "
        f"{b_cpu * 1e6:.0f} us CPU; ratio idle poll / baseline: wall {wall / n / b_wall:.3f}, "
        f"CPU {cpu / n / b_cpu:.3f}"
    )
    floor = _floor(sample, store)
    print(
        f"floor: the one request of an idle table alone ({len(sample)} tables, "
        f"{'a stat of the timeline folder' if store == 'local' else 'its listing, 16 at once'}): "
        f"{floor * 1e6:.0f} us CPU a table; ratio idle poll / floor: CPU {cpu / n / floor:.2f}"
    )

    # 2. the daemon's loop
    starts = Starts()
    runner_log = logging.getLogger("hoodied.runner")
    runner_log.setLevel(logging.INFO)
    runner_log.addHandler(starts)
    latencies: list[float] = []
    after_poll: list[float] = []
    supervisor.start_workers()
    with (
        HealthServer(metrics, heartbeats, interval) as health,
        HealthProbe(health.url, 0.5) as probe,
    ):
        scheduler = start_polling(supervisor.poll, interval, config.poll_jitter)
        try:
            ends = [heartbeats.last_poll_succeeded]

            def next_poll_ended() -> bool:
                if heartbeats.last_poll_succeeded != ends[-1]:
                    ends.append(heartbeats.last_poll_succeeded)
                    return True
                return False

            _wait(next_poll_ended, 3 * interval + 600, 0.05)
            w0, c0 = time.monotonic(), time.process_time()
            for _ in range(args.loop_polls):
                _wait(next_poll_ended, 3 * interval + 600, 0.05)
            loop_share = (time.process_time() - c0) / (time.monotonic() - w0) * 100
            print(
                f"the daemon's loop: CPU share {loop_share:.2f} % over {args.loop_polls} interval(s) of "
                f"{interval:g} s; /healthz asked {probe.asked} times, {probe.green} green"
                + (f" (first not: {probe.first_failure})" if probe.first_failure else "")
            )

            by_uri = {t.uri: t for t in supervisor.tables()}
            for i in random.Random(7).sample(range(n), min(args.trials, n)):
                trial = _trial(by_uri[uris[i]], Storage.for_uri(uris[i]), starts, interval)
                if trial is None:
                    latencies.append(float("nan"))
                else:
                    after_poll.append(trial[0])
                    latencies.append(trial[1])
                _wait(lambda: not supervisor.running, 120, 0.05)
        finally:
            supervisor.stop_claiming()
            scheduler.shutdown(wait=True)
            supervisor.drain(60)
            runner_log.removeHandler(starts)
    slowest = max(latencies) if latencies and all(x == x for x in latencies) else float("nan")
    if after_poll:
        print(
            f"start latency ({len(latencies)} trials, each requested "
            f"{statistics.mean(after_poll) * 1000:.0f} ms after the daemon polled its table on average): "
            + ", ".join(f"{x:.2f} s" for x in latencies)
        )

    name = "local disk" if store == "local" else "S3 (moto)"
    ok = targets.check(
        f"fleet of {n} idle tables on {name}: CPU share at {interval:g} s",
        max(share, loop_share),
        CPU_SHARE_LIMIT,
        unit="%",
        strict=True,
    )
    ok &= targets.check(
        f"fleet of {n} idle tables on {name}: requests per table per poll",
        max(counted, received),
        REQUESTS_LIMIT,
        unit="",
        strict=True,
    )
    ok &= targets.check(
        f"fleet of {n} idle tables on {name}: slowest start of a requested instant",
        slowest,
        interval + LATENCY_SLACK,
        unit=" s",
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--store", default="local,s3", help="local, s3 or both (comma-separated)")
    ap.add_argument("--polls", type=int, default=5, help="idle polls called back to back")
    ap.add_argument("--poll-interval", type=float, default=30.0)
    ap.add_argument("--loop-polls", type=int, default=2, help="idle intervals of the loop measured")
    ap.add_argument("--trials", type=int, default=3, help="requested instants whose start is timed")
    ap.add_argument("--schedule", action="store_true", help="schedule compaction and clean at every poll")
    ap.add_argument("--werkzeug", action="store_true", help="the S3 server closes every connection")
    ap.add_argument("--profile", metavar="DIR", help="profile one more idle poll, stats written to DIR")
    args = ap.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a long run shows as it goes
    stores = [s.strip() for s in args.store.split(",") if s.strip()]
    if not stores or any(s not in STORES for s in stores):
        ap.error(f"--store: one or more of {', '.join(STORES)}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hoodied-bench-poll-") as tmp_dir:
        tmp = Path(tmp_dir)
        template = tmp / "template"
        build_template(template)
        built = time.time()
        for store in stores:
            work = tmp / store
            work.mkdir()
            t0 = time.perf_counter()
            server = None
            if store == "local":
                uris = local_fleet(work / "tables", template, args.tables)
            else:
                server = FleetS3(work, template, args.tables, werkzeug=args.werkzeug)
                server.start()
                os.environ.update(server.environment())
                uris = server.uris
            print(f"== {store}: {args.tables} tables, built in {time.perf_counter() - t0:.1f} s (untimed)")
            time.sleep(max(0.0, built + QUIET_FOLDER_AGE - time.time()))  # idle: nothing written just now
            try:
                run_store(store, uris, work, server, args)
            finally:
                if server is not None:
                    server.stop()
    print(f"benchmark run in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
