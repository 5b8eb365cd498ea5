"""The chaos writer, a process of its own (``python -m support.chaos.writer``): commits the trial's batches
(:mod:`support.chaos.ledger`) with our table writer under the table's ZooKeeper lock, as a Hudi writer with
optimistic concurrency and the LAZY failed-writes policy does (a heartbeat per commit), until the stop file
appears or ``--batches`` are done.

A batch that fails (a conflict with a clustering, a lock timeout, a storage error, a full disk) is recorded
as failed and not retried: it is simply not part of the table. After a SIGKILL the next start goes on with the
next batch number; the killed commit is left for the LAZY clean to roll back once its heartbeat expired. A
start during an outage of the store waits for it (``OPEN_PATIENCE``).
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from pathlib import Path

from hoodie.errors import StorageError
from hoodie.lock import LockProvider
from hoodie.testing.table_writer import TableWriter, WriteConfig
from hoodie.write.heartbeat import HeartbeatConfig
from hoodied.coordination import identity
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig
from support.chaos.ledger import Ledger, batch

#: The writers' heartbeat (hoodie.client.heartbeat.*): a killed commit is a failed write after 2 s.
HEARTBEAT = HeartbeatConfig(interval_ms=1000, tolerable_misses=2)
#: Seconds a (re)started writer waits for the store to answer before it gives up.
OPEN_PATIENCE = 120.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="chaos-writer")
    p.add_argument("--table", required=True)
    p.add_argument("--ledger", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--zookeeper", required=True, help="host:port")
    p.add_argument("--lock-path", required=True)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--batches", type=int, default=10_000)
    p.add_argument("--pause", type=float, default=0.7, help="mean seconds between batches")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    ledger = Ledger(Path(args.ledger))
    stop = Path(args.stop_file)
    rng = random.Random(f"writer-{args.seed}-{ledger.next_batch()}")
    zookeeper = ZooKeeper(
        ZooKeeperConfig(connect=args.zookeeper, session_timeout=6.0), identity("chaos-writer")
    )
    zookeeper.start()
    number = ledger.next_batch()

    def requested(instant_time: str) -> None:
        ledger.append(batch=number, event="requested", instant=instant_time)

    writer = _open(args.table, zookeeper.table_lock(args.lock_path, acquire_timeout=20.0), stop)
    writer.on_requested = requested
    try:
        while number < args.batches and not stop.exists():
            b = batch(args.seed, number)
            try:
                result = writer.upsert(b.rows(), b.delete_keys())
            except Exception as e:  # not acknowledged: the batch is not part of the table
                ledger.append(batch=number, event="failed", error=f"{type(e).__name__}: {e}"[:500])
            else:
                ledger.append(batch=number, event="acked", instant=result.instant_time)
            number += 1
            time.sleep(rng.uniform(0.2, 2 * args.pause))
    finally:
        zookeeper.stop()
    return 0


def _open(table: str, lock: LockProvider, stop: Path) -> TableWriter:
    """Open the table, waiting out an outage of the store as a streaming writer's restart does (a writer
    started again during a 100% outage must not count as one that exited by itself)."""
    deadline = time.monotonic() + OPEN_PATIENCE
    while True:
        try:
            return TableWriter.open(
                table,
                lock=lock,
                config=WriteConfig(heartbeat=HEARTBEAT, small_file_limit=60_000, lock_timeout_seconds=20.0),
            )
        except StorageError:
            if time.monotonic() > deadline or stop.exists():
                raise
            time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main())
