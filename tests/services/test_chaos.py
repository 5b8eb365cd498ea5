"""The chaos campaign (tests/support/chaos): a writer committing upserts and deletes beside three replicas
running every service, under kills, ZooKeeper cuts and partitions, a full disk, replicas frozen past their
session and heartbeat, and second executors of the same instants (an alias daemon, a daemon on another
ZooKeeper base path, an operator's one-offs and cancels); then the writer's acknowledged records are all
there with their latest values (hudi-rs), no instant completed twice, nothing is left outside the live slices
after a clean, and every daemon is healthy and stops with 0.

By default one short trial runs (a local table, with stops and one-offs but no second daemon: two more
Spark drivers to start made seed 4's 30 s trial take 213 s instead of 146 s; the object store's faults have
their short tests in test_storage_faults.py); ``-m campaign`` runs one on S3 and ``HOODIED_CHAOS_TRIALS`` (30)
trials from seed ``HOODIED_CHAOS_SEED`` (1), on local tables and S3 in turn, with every actor. ``python -m
support.chaos --trials 100 --seed 1 --stores local,s3`` (from ``tests/``; ``make chaos``) is the same campaign
as a command, with counts."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from hoodie.storage.identity import table_identity
from support.chaos.__main__ import report
from support.chaos.actors import OneOff, outcomes, spellings
from support.chaos.faults import Tmpfs
from support.chaos.trial import TrialResult, TrialSpec, run_trial
from support.s3_faults import FaultProxy
from support.s3_server import S3Server
from support.zk_server import ZooKeeperServer


def _trial(
    tmp_path: Path, zk: ZooKeeperServer, spec: TrialSpec, s3: tuple[S3Server, FaultProxy] | None = None
) -> TrialResult:
    no_tmpfs = Tmpfs.unavailable(tmp_path / "probe")
    if no_tmpfs:
        spec = replace(spec, kinds=tuple(k for k in spec.kinds if k != "disk_full"))
    return run_trial(spec, tmp_path / f"seed-{spec.seed}", zk, tmpfs=no_tmpfs is None, s3=s3)


@pytest.mark.zookeeper
@pytest.mark.spark
@pytest.mark.slow
def test_a_short_chaos_trial(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> None:
    # Seed 143: a v9 MOR table; within 30 s its schedule kills the writer and a replica, fills the disk,
    # partitions a replica from ZooKeeper, SIGSTOPs one past its session and heartbeat, and has an operator
    # run a one-off on a pending instant.
    spec = TrialSpec.of(143, 30.0, versions=(6, 8, 9), actors=("stop_replica", "oneoff"))
    result = _trial(tmp_path, zookeeper_server, spec)
    assert result.ok, result.summary() + "\n" + "\n".join(result.events)
    assert len(result.faults) >= 3, result.summary()
    assert result.faults["stop_replica"] >= 1, result.summary()
    assert result.verdict.batches_acked > 0
    assert result.verdict.records_checked > 0


@pytest.mark.zookeeper
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.s3
def test_a_chaos_trial_on_an_object_store(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, s3_server: S3Server
) -> None:
    # Seed 5 on S3: a v9 table; the store fails or throttles requests instead of the disk filling.
    spec = TrialSpec.of(5, 30.0, stores=("s3",))
    with FaultProxy(s3_server.endpoint) as proxy:
        result = _trial(tmp_path, zookeeper_server, spec, (s3_server, proxy))
    assert result.ok, result.summary() + "\n" + "\n".join(result.events)
    assert result.verdict.records_checked > 0


@pytest.mark.zookeeper
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.s3
def test_the_chaos_campaign(tmp_path: Path, zookeeper_server: ZooKeeperServer, s3_server: S3Server) -> None:
    trials = int(os.environ.get("HOODIED_CHAOS_TRIALS", "30"))
    first = int(os.environ.get("HOODIED_CHAOS_SEED", "1"))
    with FaultProxy(s3_server.endpoint) as proxy:
        results = [
            _trial(
                tmp_path,
                zookeeper_server,
                TrialSpec.of(seed, 45.0, stores=("local", "s3")),
                (s3_server, proxy),
            )
            for seed in range(first, first + trials)
        ]
    failed = [r for r in results if not r.ok]
    summary = report(results, sum(r.seconds for r in results))
    assert not failed, summary + "\n" + "\n".join(r.summary() for r in failed)


# The harness's own parts: what the actors and the counts rest on.


def test_every_spelling_of_the_table_names_one_table(tmp_path: Path) -> None:
    # The alias daemon and the one-offs write the table's path these ways; were any of them another table,
    # the alias would be a second table's daemon, not a second executor of the same instants.
    table = tmp_path / "disk" / "chaos"
    table.mkdir(parents=True)
    link = tmp_path / "table-link"
    link.symlink_to(table, target_is_directory=True)
    local = spellings(str(table), link)
    assert len(set(local)) == len(local) == 6
    assert {table_identity(p) for p in local} == {str(table)}
    s3 = spellings("s3://bucket/chaos")
    assert {table_identity(p) for p in s3} == {"s3://bucket/chaos"}
    assert any(p.startswith("s3a://") for p in s3)


def test_a_daemon_log_counts_its_completions_lost_races_and_instants_left_alone(tmp_path: Path) -> None:
    messages = [
        "compaction 20261128010203040 of chaos completed in 3.1 s: 2 file slice(s)",
        "clustering 20261128010203041 of chaos-alias lost the race: lost the race: clustering ... is "
        "no longer inflight (completed)",
        "clustering 20261128010203041 of chaos-alias: lost the race: clustering ... (lost_race)",
        "logcompaction 20261128010203042 of chaos: left alone: logcompaction ... its heartbeat is fresh "
        "(foreign)",
        "compaction 20261128010203043 of chaos needed nothing in 0.1 s: already completed",
    ]
    log = tmp_path / "a1.log"
    log.write_text("".join(json.dumps({"level": "INFO", "msg": m}) + "\n" for m in messages) + "not json\n")
    seen = outcomes(log)
    assert dict(seen.completed) == {("compaction", "20261128010203040"): 1}
    assert seen.lost_race == 1  # the runner's warning, not the outcome's record of the same run
    assert seen.foreign == 1


@pytest.mark.parametrize(
    ("code", "output", "kind"),
    [
        (0, "completed compaction 20261128010203040: 2 slice(s), in 3.0 s (2 task(s) on Spark)", "completed"),
        (0, "compaction 20261128010203040 of /t has already completed", "nothing"),
        (
            3,
            "compaction T of /t is inflight: its heartbeat is fresh (written 0 s ago): replica r1 ...",
            "refused_live",
        ),
        (
            3,
            "compaction T of /t is being run elsewhere: instant T of /t is held by replica r2 ...",
            "refused_live",
        ),
        (3, "compaction T aborted: lost the race: compaction T is no longer inflight", "lost_race"),
        (
            3,
            "compaction T of /t is inflight: not started by hoodied, and its owner is not provably gone",
            "refused",
        ),
        (2, "hoodied: error: ClaimHeld: .hoodie/.aux/hoodied/claims/compaction-T.claim is claimed", "failed"),
    ],
)
def test_a_one_off_is_counted_by_how_it_ended(code: int, output: str, kind: str) -> None:
    oneoff = OneOff("compaction", "20261128010203040", "inflight", take_over=False, path="/t", code=code)
    oneoff.output = output
    assert oneoff.kind == kind
