"""The chaos campaign: hoodied beside a live writer, under faults (issue 22).

One *trial* (:mod:`support.chaos.trial`) creates a Hudi table (table version 6, 8 or 9, COW or MOR, on a
size-limited tmpfs or on the S3-compatible server behind a fault-injecting proxy), starts a writer process
committing upserts and deletes with our table writer under the shared ZooKeeper lock
(:mod:`support.chaos.writer`, which keeps a ledger of what it was told committed), three ``hoodied run``
replicas running every service, each reaching ZooKeeper through a TCP proxy of its own, and a fault injector
(:mod:`support.chaos.faults`) that at seeded random moments SIGKILLs a replica or the writer, cuts a
replica's ZooKeeper connection, partitions it past its session timeout (the session expires), makes the
object store fail or throttle, or fills the disk. Beside them run the second executors of issue 32
(:mod:`support.chaos.actors`), drawn from the seed: a daemon naming the table under another spelling, a daemon
on another ZooKeeper base path (its claims invisible to the replicas; only the instants' leases hold it off),
an operator running one-off ``hoodied compact|cluster|logcompact --mode execute --instant T [--take-over]``
commands and ``hoodied ctl cancel`` on instants the replicas may be running, and replicas frozen with SIGSTOP
past their session and their heartbeat, then continued. The ``stall`` fault (issue 33,
:mod:`support.chaos.stalls`) freezes a replica at a chosen request instead (a commit, a plan, a history
manifest, a base file, a delete: on S3 through a stalling proxy of its own, :mod:`support.stall_proxy`; on
local disk at the failpoint before that write) and lets the request go after its leases passed. Then it
heals everything, lets the daemons settle, stops them, runs a last clean, and judges
(:mod:`support.chaos.judge`):

- every record the writer's acknowledged commits wrote is there with its latest value, and nothing else
  (hudi-rs reads the table; the expected rows come from the ledger);
- no instant completed twice (one completed file per instant, in the metadata table's timeline too; one
  ``completed`` log line across the daemons and the one-offs' output);
- every file a completed commit names is there, unless a later completion took its slice out of the table
  (its group replaced, or a newer base file of its group committed);
- every instant seen completed while the trial ran (timeline samples every few seconds, the daemons' logs,
  the one-offs) is still on the active timeline or in its history;
- no two pending plans (compaction, log compaction, clustering) share a file group, at the end or in two
  samples running;
- after the clean, no data file lies outside the latest file slices (nothing left of failed attempts);
- every daemon is healthy at the end, or was restarted after the injector killed it, and stops with 0;
- the second daemon's table lock is the writers' (its lock contenders show up there, never under its own
  base path).

Each trial counts what the second executors did (``alias_runs``, ``oneoff_runs``, ``oneoff_refused``,
``stops``, ...), how many runs ended ``lost the race``, and the stalls that struck by kind with how many of
their stale writes were then refused.

Everything a trial does is derived from its seed, so a failing seed runs the same schedule again (the
processes' own timing still varies). ``python -m support.chaos --trials N --seed S`` (from ``tests/``, or
``make chaos``) runs a campaign and prints the counts.
"""
