"""``make bench``: every ``benchmarks/bench_*.py``, each in its own process, then one table of their targets.

    python benchmarks/run_all.py [--only NAME[,NAME]] [--quick] [--timeout SECONDS]

Each benchmark runs with the arguments :data:`ARGUMENTS` gives it (aimed at about 45 minutes for the whole
run on two cores: see its comments for what each took; ``--quick``: small sizes, about 6 minutes in all, for
checking that they run, not for figures), its output streamed as it comes. A benchmark missing from the
table runs without arguments. ``--only`` takes names with or without the ``bench_`` prefix and the ``.py``.

At the end: one table of every ``TARGET`` line the benchmarks printed (:mod:`targets`: benchmark, target,
measured, limit, verdict), the benchmarks that printed none, and those that failed to run. The exit code is
1 when a benchmark failed to run (a nonzero exit, a timeout), 0 otherwise: a MISSED target is a finding to
report, not a failure of the run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import targets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: Per benchmark: (the arguments of ``make bench``, those of ``--quick``). Each comment says what the
#: arguments trade and how long the benchmark took in a whole run on two cores that other benchmarks shared
#: (load 3 to 12, November 2026: 64 min in all, before the cuts noted here); on idle cores, less.
ARGUMENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # 0.5 min: the timeline of 10,000 commits, archived once.
    "bench_archival": (("--commits", "10000"), ("--commits", "200", "--repeat", "2")),
    # 500,000 rows a writer, 3 runs each, gzip and snappy (9 min with 1,000,000 rows and 5 runs).
    "bench_base_file_write": (("500000", "3"), ("20000", "2")),
    # 20,000 files deleted on local disk, 2,000 on S3, instead of 100,000 and 5,000: the figures are per
    # 1,000 files (7 min with 5,000 on S3; its one-at-a-time run with 10 ms a request alone took 2 min).
    "bench_clean": (
        ("--files", "20000", "--s3-files", "2000"),
        ("--files", "1000", "--s3-files", "200"),
    ),
    # 5 min: 50 files of 20,000 rows into one sorted file, 3 runs of each variant, and a profiled run when
    # the target is missed.
    "bench_clustering": (("--rows", "1000000", "--repeat", "3"), ("--rows", "20000", "--repeat", "1")),
    # 2 min: a 200 MB group of 8 slices. Its fixed RSS (~200 MB) weighs on the ratios at this size: the
    # README's figures are of --group-bytes 1e9 (about 10 min).
    "bench_clustering_memory": (("--group-bytes", "2e8"), ("--group-bytes", "4e6", "--slices", "2")),
    # 7 min: 1,000,000 rows + 5 log files; 3 runs per variant instead of 5, 2 of the Spark job.
    "bench_compaction": (
        ("--repeat", "3", "--spark-repeat", "2"),
        ("--rows", "20000", "--update-rows", "2000", "--commits", "2", "--repeat", "1", "--no-spark"),
    ),
    # 100,000 tables (the target's size) on local disk, one replica, commit callbacks. Not run to the end
    # at that size here: 25,000 tables took 10 min (build 1.3 min, cold poll 3.2 min, 2 min idle, the
    # status requests, removal); 100,000 built in 5.6 min, so expect about 40 min. Quick: 1,000 tables,
    # half a minute idle (about 1.5 min).
    "bench_fleet_local": (
        ("--tables", "100000"),
        ("--tables", "1000", "--idle-minutes", "0.5", "--requests", "3", "--trials", "1"),
    ),
    # 3 min: the four plan sizes, 2 runs each instead of 3 (Spark's start is paid once).
    "bench_job_sizing": (
        ("--rows", "2000", "20000", "100000", "400000", "--repeat", "2"),
        ("--rows", "2000", "--repeat", "1"),
    ),
    # 1.5 min: 200,000 points clustered three ways on three column pairs.
    "bench_layout": (("--rows", "200000"), ("--rows", "5000", "--files", "4", "--boxes", "50")),
    # 3.5 min: indexing, listing and commit upkeep of 200,000 rows, 3 runs instead of 5.
    "bench_metadata": (("--repeat", "3"), ("--rows", "5000", "--partitions", "4", "--repeat", "1")),
    # 9 min: one compaction of 1,000 file groups (the target's size) with its metadata-table deltacommit,
    # one run: both figures of the ratio come from the same run.
    "bench_metadata_upkeep": (
        ("--partitions", "100", "--groups", "10", "--repeat", "1"),
        ("--partitions", "4", "--groups", "5", "--repeat", "1"),
    ),
    # 2 min: 100,000 rows and 50 idle tables instead of 200,000 and 100 (moto's S3 server is slow).
    "bench_object_store": (
        ("--rows", "100000", "--tables", "50", "--repeat", "3"),
        ("--rows", "5000", "--tables", "5", "--repeat", "1", "--polls", "2"),
    ),
    # 7 min: 10,000 idle tables (the target's size) on local disk. S3 is a run of its own (``bench_poll.py
    # --tables 2000 --store s3``, 8 min): moto serves about 90 listings a second, so 10,000 tables on it take
    # longer than a poll interval whatever the poller does.
    "bench_poll": (
        ("--tables", "10000", "--store", "local"),
        ("--tables", "10", "--polls", "2", "--store", "local", "--trials", "1", "--loop-polls", "1"),
    ),
    # About 14 min: 600 idle tables on moto's S3 server, three replicas, the daemon's idle clocks 10 times
    # faster (poll 3 s, sweep 60 s: the figures are scaled back to the defaults; bench_fleet.py's doc).
    # 10,000 tables do not fit (cold polls alone take moto minutes a phase, and the defaults take 15 minutes
    # of warm-up and 10 of window per phase), and 2,000 at 5x did not finish on main at 0df3fe3: once the
    # replicas joined, the first one's poll spent over 6 minutes dropping the gauges of the tables it gave
    # away (hoodied/metrics.py Metrics._forget walks every series for each table), its tables unpolled.
    "bench_fleet": (
        ("--tables", "600", "--speed", "10"),
        ("--tables", "60", "--speed", "40", "--tries", "3", "--shared-tries", "0", "--session-timeout", "3"),
    ),
    # 5 s: every fixture table, 7 runs per reader.
    "bench_snapshot_read": (("7",), ("1",)),
    # 3.5 min: 2,000,000 rows in 20 file groups instead of 10,000,000 in 100 (whose build alone is long).
    "bench_spark_cluster": (
        ("--rows", "2000000", "--file-groups", "20"),
        ("--rows", "20000", "--file-groups", "2"),
    ),
}

#: A benchmark killed after this long counts as failed (``--timeout``).
TIMEOUT_SECONDS = 3600.0


@dataclass
class Outcome:
    """One benchmark's run: its exit code (None: killed after the timeout), time and ``TARGET`` lines."""

    name: str
    seconds: float = 0.0
    returncode: int | None = 0
    targets: list[dict[str, str]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.returncode != 0


def discover() -> list[str]:
    """The benchmarks in this folder, by name (``bench_x``), sorted."""
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def select(available: Sequence[str], only: str | None) -> list[str]:
    """The benchmarks ``--only`` names (all when ``None``); an unknown name is an error naming it."""
    if not only:
        return list(available)
    chosen = []
    for raw in only.split(","):
        name = raw.strip().removesuffix(".py")
        if not name:
            continue
        name = name if name.startswith("bench_") else f"bench_{name}"
        if name not in available:
            raise ValueError(f"no benchmark {raw.strip()!r}; there are: {', '.join(available)}")
        if name not in chosen:
            chosen.append(name)
    return chosen


def arguments(name: str, quick: bool) -> tuple[str, ...]:
    """The arguments :data:`ARGUMENTS` gives ``name`` (none for a benchmark it lacks: its own defaults)."""
    default, small = ARGUMENTS.get(name, ((), ()))
    return small if quick else default


def child_environment() -> dict[str, str]:
    """This environment, with the checkout's packages importable (after any ``PYTHONPATH`` given: pointing
    it at another checkout measures that code) and the benchmarks' output unbuffered, so it streams."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths += [str(ROOT / "core"), str(ROOT / "services")]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_one(name: str, args: Sequence[str], timeout: float) -> Outcome:
    """Run one benchmark in its own process (and process group, so a timeout ends all it started), printing
    its output as it comes; its ``TARGET`` lines are kept."""
    cmd = [sys.executable, str(HERE / f"{name}.py"), *args]
    print(f"\n=== {name} {' '.join(args)}".rstrip(), flush=True)
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=child_environment(),
        cwd=ROOT,
        start_new_session=True,
    )
    timed_out = threading.Event()

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.killpg(proc.pid, signal.SIGKILL)

    def expire() -> None:
        timed_out.set()
        kill()

    timer = threading.Timer(timeout, expire)
    timer.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:  # interrupted (Ctrl-C): its own session would outlive us
            kill()
            proc.wait()
    seconds = time.perf_counter() - started
    code = None if timed_out.is_set() else proc.returncode
    status = f"killed after {timeout:g} s" if code is None else f"exit code {code}"
    print(f"=== {name}: {status}, {seconds:.0f} s", flush=True)
    return Outcome(name, seconds, code, targets.parse("".join(lines)))


def summary(outcomes: Sequence[Outcome]) -> str:
    """The table of every benchmark's ``TARGET`` lines, then those without any and those that failed."""
    rows = [(o.name, t["name"], t["measured"], t["limit"], t["verdict"]) for o in outcomes for t in o.targets]
    header = ("benchmark", "target", "measured", "limit", "verdict")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = ["", "targets:"]
    if rows:
        for r in [header, tuple("-" * w for w in widths), *rows]:
            out.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    else:
        out.append("  (no benchmark printed a target)")
    met = sum(1 for r in rows if r[4] == "met")
    out.append(f"  {met} met, {len(rows) - met} missed")
    without = [o.name for o in outcomes if not o.targets and not o.failed]
    if without:
        out.append(f"ran without a target: {', '.join(without)}")
    failed = [o for o in outcomes if o.failed]
    for o in failed:
        why = "killed after the timeout" if o.returncode is None else f"exit code {o.returncode}"
        out.append(f"FAILED to run: {o.name} ({why}, after {o.seconds:.0f} s)")
    total = sum(o.seconds for o in outcomes)
    out.append(
        f"{len(outcomes)} benchmark(s) in {total / 60:.1f} min: "
        + ", ".join(f"{o.name.removeprefix('bench_')} {o.seconds:.0f} s" for o in outcomes)
    )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", help="benchmarks to run, comma-separated (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes: checks that they run, no figures")
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT_SECONDS, help="seconds before a benchmark is killed"
    )
    args = parser.parse_args(argv)
    try:
        names = select(discover(), args.only)
    except ValueError as e:
        parser.error(str(e))
    outcomes = [run_one(name, arguments(name, args.quick), args.timeout) for name in names]
    print(summary(outcomes))
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
