"""``hoodied demo``: the daemon keeping a live table in shape, on one machine, in a couple of minutes.

What it does, in order:

1. Creates a MERGE_ON_READ table (table version 8, ``--partitions`` partitions, a few thousand generated taxi
   trips in three commits) with the format library's table writer, in ``--path`` (default
   ``./hoodied-demo``). A folder that is already there is wiped first only when an earlier demo made it (it
   holds ``.hoodie/.aux/hoodied/demo.yaml``); anything else is refused, never deleted.
2. Starts a writer in a child process (``python -m hoodied.demo writer PATH``) that upserts a batch every
   ``--interval`` seconds (updates of existing trips and new ones; no deletes) until it is told to stop. It
   reports each commit as one JSON line on its standard output. It leaves partitions with a pending
   clustering out of its updates, as Hudi's default update strategy rejects such updates; when a write
   still conflicts with a table service it rolls its own write back and goes on with the next batch.
3. Runs the daemon in this process (:class:`~hoodied.daemon.Daemon`, embedded mode: no ZooKeeper, the
   file-system table lock, Spark ``local[2]``) with a configuration built here: poll every 2 s, schedule
   compaction (after 3 delta commits), clustering (after 4 commits) and clean (2 commits retained) on the
   table. Its configuration is also written to ``.hoodie/.aux/hoodied/demo.yaml``, for ``hoodied status``
   and ``hoodied run`` afterwards. Metrics and health are served on 127.0.0.1, ``--port`` (9464; 0 = a free
   one).
4. Prints what happens as it happens, one line each, time since the start first: the writer's commits, and
   each table-service instant the daemon schedules, runs and finishes (watched through the supervisor's
   state: its pending instants, running jobs and last results). The daemon's own log says only warnings.
5. After ``--duration`` seconds (120), or on Ctrl-C (SIGINT) or SIGTERM: stops the writer (its current
   batch commits first), lets the daemon finish the table services still pending (up to ``--drain-timeout``
   seconds; a second Ctrl-C skips this), stops the daemon (running jobs finish), prints ``hoodied status``
   for the table and a summary: commits written, table services completed, and the rows the table holds
   now (read back with :meth:`hoodie.Table.read`) next to the keys the writers wrote. The exit status is 0
   when everything ran and the two counts agree, 1 otherwise; a folder it may not wipe, a port in use or no
   Java stop it before it starts, with a one-line error and status 2.

``make demo`` installs the package (and Java, when missing) and runs it.

Output, for example::

    [00:04] writer: commit 20261123101502120 upserted 300 rows (200 updates, 100 inserts; total 1 commit, ...)
    [00:09] compaction 20261123101507311: scheduled (4 file slices)
    [00:09] compaction 20261123101507311: running
    [00:12] compaction 20261123101507311: done in 3.1 s: 4 base file(s), 2900 record(s)
"""

from __future__ import annotations

from hoodied.demo.progress import describe_plan
from hoodied.demo.run import run_demo
from hoodied.demo.table import (
    HOODIE_SETTINGS,
    MARKER,
    DemoError,
    DemoOptions,
    check_path,
    clear_previous,
    create_table,
    daemon_config,
    daemon_config_text,
    is_demo_table,
)
from hoodied.demo.writer import writer_main

__all__ = [
    "HOODIE_SETTINGS",
    "MARKER",
    "DemoError",
    "DemoOptions",
    "check_path",
    "clear_previous",
    "create_table",
    "daemon_config",
    "daemon_config_text",
    "describe_plan",
    "is_demo_table",
    "run_demo",
    "writer_main",
]
