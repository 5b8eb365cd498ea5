"""``python -m support.chaos --trials N --seed S`` (from ``tests/``; ``make chaos TRIALS=N SEED=S``): a
campaign of N trials, seeds S, S+1, ...; prints a line per trial and the totals, keeps the folders of failed
trials (their logs, ledger and a copy of the table), and exits 1 when any trial failed. ``--seeds 7,42``
runs exactly those seeds again; ``--actors alias,oneoff`` limits the second executors (``none``: the
replicas and the writer alone, as before issue 32)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from support.chaos.faults import Tmpfs
from support.chaos.trial import ACTORS, TrialResult, TrialSpec, run_trial
from support.s3_faults import FaultProxy
from support.s3_server import S3Server, moto_available
from support.stall_proxy import STALL_KINDS
from support.zk_server import ZooKeeperServer, zookeeper_available


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m support.chaos", description=__doc__)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seeds", help="comma-separated seeds to run (instead of --trials/--seed)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of faults per trial")
    p.add_argument("--versions", default="6,8,9")
    p.add_argument("--stores", default="local", help="local and/or s3, comma-separated")
    p.add_argument("--work", help="folder for the trials (default: a new temporary one)")
    p.add_argument(
        "--actors",
        default=",".join(ACTORS),
        help=f"second executors that may appear, comma-separated (default all: {','.join(ACTORS)}; none)",
    )
    args = p.parse_args(argv)
    actors = tuple(a for a in args.actors.split(",") if a and a != "none")
    unknown = sorted(set(actors) - set(ACTORS))
    if unknown:
        p.error(f"--actors: unknown {', '.join(unknown)} (known: {', '.join(ACTORS)})")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    missing = zookeeper_available()
    if missing:
        print(f"cannot run the campaign: {missing}", file=sys.stderr)
        return 2
    seeds = (
        [int(s) for s in args.seeds.split(",")]
        if args.seeds
        else list(range(args.seed, args.seed + args.trials))
    )
    versions = tuple(int(v) for v in args.versions.split(","))
    stores = tuple(args.stores.split(","))
    work = Path(args.work or tempfile.mkdtemp(prefix="hoodied-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    no_tmpfs = Tmpfs.unavailable(work / "probe")
    if no_tmpfs:
        print(f"disk_full is not drawn: {no_tmpfs}")
    results: list[TrialResult] = []
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        zk = stack.enter_context(ZooKeeperServer(work / "zookeeper"))
        s3 = None
        if "s3" in stores:
            missing = moto_available()
            if missing:
                print(f"cannot run S3 trials: {missing}", file=sys.stderr)
                return 2
            (work / "s3").mkdir(exist_ok=True)
            server = S3Server(work / "s3")
            server.start()
            stack.callback(server.stop)
            os.environ.update(server.environment())  # the judges read the store directly
            s3 = (server, stack.enter_context(FaultProxy(server.endpoint)))
        for seed in seeds:
            spec = TrialSpec.of(seed, args.duration, versions=versions, stores=stores, actors=actors)
            if no_tmpfs:
                spec = replace(spec, kinds=tuple(k for k in spec.kinds if k != "disk_full"))
            result = run_trial(spec, work / f"seed-{seed}", zk, tmpfs=not no_tmpfs, s3=s3)
            results.append(result)
            print(result.summary(), flush=True)
            for line in result.events:  # what the operator's commands ended with (kept: the folder goes)
                if line.startswith(("one-off ", "ctl ")):
                    print(f"      {line}", flush=True)
            if result.ok:
                shutil.rmtree(result.work, ignore_errors=True)
    print(report(results, time.monotonic() - started))
    failed = [r.spec.seed for r in results if not r.ok]
    if failed:
        again = ",".join(map(str, failed))
        print(f"failed seeds (run again with --seeds {again}); their folders are in {work}")
    return 1 if failed else 0


def report(results: list[TrialResult], seconds: float) -> str:
    faults: Counter[str] = Counter()
    actors: Counter[str] = Counter()
    stalls: Counter[str] = Counter()
    completed: Counter[str] = Counter()
    by_version: Counter[str] = Counter()
    for r in results:
        faults.update(r.faults)
        actors.update(r.actors)
        stalls.update(r.stalls)
        completed.update({k: n for k, n in r.verdict.completed.items() if not k.startswith("timeline:")})
        by_version[f"v{r.spec.table_version} {r.spec.table_type} {r.spec.store}"] += 1
    acked = sum(r.verdict.batches_acked for r in results)
    records = sum(r.verdict.records_checked for r in results)
    lost = sum(1 for r in results for p in r.problems if "lost" in p)
    twice = sum(1 for r in results for p in r.problems if "more than once" in p or "completed by two" in p)
    lines = [
        f"{len(results)} trial(s) in {seconds / 60:.1f} min, {sum(r.ok for r in results)} passed",
        "  tables: " + ", ".join(f"{k} x{n}" for k, n in sorted(by_version.items())),
        "  faults injected: " + (", ".join(f"{k} {n}" for k, n in sorted(faults.items())) or "none"),
        "  instants completed: " + (", ".join(f"{k} {n}" for k, n in sorted(completed.items())) or "none"),
        f"  writer batches acknowledged {acked}; records checked {records}",
        f"  trials with lost records {lost}; with duplicated records or double completions {twice}",
        f"  replica restarts after kills {sum(r.replica_restarts for r in results)}",
        "  second executors: " + (", ".join(f"{k} {n}" for k, n in sorted(actors.items())) or "none"),
        f"  runs that ended lost the race {actors['lost_race']} (daemons' "
        f"{actors['lost_race'] - actors['oneoff_lost_race']}, one-offs' {actors['oneoff_lost_race']})",
        f"  stalls armed {faults['stall']}, struck {sum(stalls[f'stall_{k}'] for k in STALL_KINDS)}, "
        f"missed {stalls['stall_missed']}: "
        + ", ".join(
            f"{k} {stalls[f'stall_{k}']} (stale write refused {stalls[f'stall_{k}_refused']}, "
            f"by the store {stalls[f'stall_{k}_store_refused']})"
            for k in STALL_KINDS
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
