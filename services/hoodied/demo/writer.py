"""The demo's writer, a child process (``python -m hoodied.demo writer PATH``) upserting batches."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from hoodie.errors import HoodieError, WriteConflict
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import TripGenerator
from hoodie.testing.table_writer import TableWriter
from hoodie.write.failed_writes import FAILED_WRITE_ACTIONS, rollback_failed_write
from hoodied.demo.table import DemoOptions
from hoodied.signals import StopSignals

if TYPE_CHECKING:
    pass

#: Relative to the table's base path: the demo's configuration, whose presence marks a table the demo made.

# -- the writer (a child process) ----------------------------------------------------------------------------


def _emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _stop_at_eof(stop: threading.Event) -> None:
    """The parent stops the writer by closing its standard input (or by dying)."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.readline():
            pass
    stop.set()


def _roll_back_own_writes(storage: Storage) -> list[str]:
    """Roll back this writer's unfinished writes (it is the table's only ingestion writer: any pending
    commit or deltacommit is one of its own), as a Hudi writer does with its failed writes."""

    done = []
    lock = FileSystemLock(storage)
    for instant in Table.load(storage).timeline.pending():
        if instant.action in FAILED_WRITE_ACTIONS and rollback_failed_write(storage, lock, instant):
            done.append(instant.time)
    return done


def writer_main(argv: Sequence[str]) -> int:
    """``python -m hoodied.demo writer PATH``: upsert a batch every ``--interval`` seconds until standard
    input closes or SIGTERM; one JSON line per event on standard output."""

    parser = argparse.ArgumentParser(prog="python -m hoodied.demo writer")
    parser.add_argument("path")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--batch-rows", type=int, default=300)
    parser.add_argument("--update-fraction", type=float, default=2 / 3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args(argv)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop (Ctrl-C reaches both)
    stop = threading.Event()
    StopSignals(lambda signum, count: stop.set(), signums=(signal.SIGTERM,)).install()
    threading.Thread(target=_stop_at_eof, args=(stop,), name="stdin", daemon=True).start()

    writer = TableWriter.open(args.path)
    live = Table.open(args.path).read(columns=["uuid", "city", "ts"])
    keys: list[str] = live.column("uuid").to_pylist()
    cities: list[str] = live.column("city").to_pylist()
    last_ts = int(max(live.column("ts").to_pylist(), default=0))
    gen = TripGenerator(args.seed, args.partitions)
    rng = random.Random(args.seed)
    commits = updates_total = inserts_total = conflicts = errors = 0
    _emit({"event": "started", "pid": os.getpid(), "keys": len(keys)})

    def event_times(n: int) -> pa.Array:
        # Event times after every earlier one (the table orders records by ts: an update must be newer).
        nonlocal last_ts
        start = max(last_ts + 1, int(time.time() * 1000))
        last_ts = start + n
        return pa.array(np.arange(start, start + n, dtype=np.int64))

    while not stop.is_set():
        began = time.monotonic()
        table = Table.open(args.path)
        busy = {gid.partition_path for gid in table.pending_clustering_file_groups()}
        candidates = [i for i, c in enumerate(cities) if c not in busy]
        n_updates = min(round(args.batch_rows * args.update_fraction), len(candidates))
        picked = rng.sample(candidates, n_updates)
        updates = gen.rows([keys[i] for i in picked], [cities[i] for i in picked])
        new_keys = gen.keys(args.batch_rows - n_updates)
        inserts = gen.rows(new_keys)
        batch = pa.concat_tables([updates, inserts])
        batch = batch.set_column(batch.schema.get_field_index("ts"), "ts", event_times(batch.num_rows))
        try:
            result = writer.upsert(batch)
        except WriteConflict as e:
            conflicts += 1
            rolled = _roll_back_own_writes(writer.storage)
            _emit({"event": "conflict", "message": str(e), "rolled_back": rolled})
        except (HoodieError, OSError) as e:
            errors += 1
            rolled = _roll_back_own_writes(writer.storage)
            _emit({"event": "error", "message": f"{type(e).__name__}: {e}", "rolled_back": rolled})
        else:
            keys.extend(new_keys)
            cities.extend(inserts.column("city").to_pylist())
            commits += 1
            updates_total += n_updates
            inserts_total += len(new_keys)
            _emit(
                {
                    "event": "commit",
                    "instant": result.instant_time,
                    "rows": batch.num_rows,
                    "updates": n_updates,
                    "inserts": len(new_keys),
                    "skipped_partitions": sorted(busy),
                    "commits": commits,
                    "keys": len(keys),
                    "seconds": round(time.monotonic() - began, 3),
                }
            )
        stop.wait(max(0.0, args.interval - (time.monotonic() - began)))
    _emit(
        {
            "event": "stopped",
            "commits": commits,
            "updates": updates_total,
            "inserts": inserts_total,
            "conflicts": conflicts,
            "errors": errors,
            "keys": len(keys),
        }
    )
    return 0


class WriterProcess:
    """The writer child, its events (parsed JSON lines) in :attr:`events`."""

    def __init__(self, path: Path, options: DemoOptions) -> None:
        command = [
            sys.executable,
            "-m",
            "hoodied.demo",
            "writer",
            str(path),
            "--interval",
            str(options.interval),
            "--batch-rows",
            str(options.batch_rows),
            "--update-fraction",
            str(options.update_fraction),
            "--partitions",
            str(options.partitions),
            "--seed",
            str(options.seed + 1),
        ]
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        # Its own process group: a Ctrl-C in the terminal reaches only us, and we stop it in order.
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, process_group=0
        )
        self._reader = threading.Thread(target=self._read, name="demo-writer-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            text = line.strip()
            if not text:
                continue
            try:
                event = json.loads(text)
            except ValueError:
                event = {"event": "output", "message": text}
            self.events.put(event if isinstance(event, dict) else {"event": "output", "message": text})

    def stop(self, timeout: float) -> int | None:
        """Ask the writer to stop (its current batch commits first) and wait; kill it after ``timeout``.
        Returns its exit status (None if it had to be killed)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            code = None
        self._reader.join(5)
        return code

    def drain_events(self) -> Iterator[dict[str, Any]]:
        while True:
            try:
                yield self.events.get_nowait()
            except queue.Empty:
                return
