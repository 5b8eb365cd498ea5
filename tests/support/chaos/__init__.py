"""The chaos campaign: hoodied beside a live writer, under faults (issue 22).

One *trial* (:mod:`support.chaos.trial`) creates a Hudi table (table version 6, 8 or 9, COW or MOR, on a
size-limited tmpfs or on the S3-compatible server behind a fault-injecting proxy), starts a writer process
committing upserts and deletes with our table writer under the shared ZooKeeper lock
(:mod:`support.chaos.writer`, which keeps a ledger of what it was told committed), three ``hoodied run``
replicas running every service, each reaching ZooKeeper through a TCP proxy of its own, and a fault injector
(:mod:`support.chaos.faults`) that at seeded random moments SIGKILLs a replica or the writer, cuts a
replica's ZooKeeper connection, partitions it past its session timeout (the session expires), makes the
object store fail or throttle, or fills the disk. Then it heals everything, lets the replicas settle, stops
them, runs a last clean, and judges (:mod:`support.chaos.judge`):

- every record the writer's acknowledged commits wrote is there with its latest value, and nothing else
  (hudi-rs reads the table; the expected rows come from the ledger);
- no instant completed twice (one completed file per instant; one ``completed`` log line across replicas);
- after the clean, no data file lies outside the latest file slices (nothing left of failed attempts);
- every replica is healthy at the end, or was restarted after the injector killed it, and stops with 0.

Everything a trial does is derived from its seed, so a failing seed runs the same schedule again (the
processes' own timing still varies). ``python -m support.chaos --trials N --seed S`` (from ``tests/``, or
``make chaos``) runs a campaign and prints the counts.
"""
