"""The chaos campaign (tests/support/chaos): a writer committing upserts and deletes beside three replicas
running every service, under kills, ZooKeeper cuts and partitions, a full disk; then the writer's
acknowledged records are all there with their latest values (hudi-rs), no instant completed twice, nothing
is left outside the live slices after a clean, and every replica is healthy and stops with 0.

By default one short trial runs (a local table; the object store's faults have their short tests in
test_storage_faults.py); ``-m campaign`` runs one on S3 and ``HOODIED_CHAOS_TRIALS`` (30) trials from seed
``HOODIED_CHAOS_SEED`` (1), on local tables and S3 in turn. ``python -m support.chaos --trials 100 --seed 1
--stores local,s3`` (from ``tests/``; ``make chaos``) is the same campaign as a command, with counts."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from support.chaos.__main__ import report
from support.chaos.faults import Tmpfs
from support.chaos.trial import TrialResult, TrialSpec, run_trial
from support.s3_faults import FaultProxy
from support.s3_server import S3Server
from support.zk_server import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.spark, pytest.mark.slow]


def _trial(
    tmp_path: Path, zk: ZooKeeperServer, spec: TrialSpec, s3: tuple[S3Server, FaultProxy] | None = None
) -> TrialResult:
    no_tmpfs = Tmpfs.unavailable(tmp_path / "probe")
    if no_tmpfs:
        spec = replace(spec, kinds=tuple(k for k in spec.kinds if k != "disk_full"))
    return run_trial(spec, tmp_path / f"seed-{spec.seed}", zk, tmpfs=no_tmpfs is None, s3=s3)


def test_a_short_chaos_trial(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> None:
    # Seed 4: a v8 MOR table; its schedule kills replicas and the writer, cuts and partitions ZooKeeper and
    # fills the disk within 30 s.
    result = _trial(tmp_path, zookeeper_server, TrialSpec.of(4, 30.0, versions=(6, 8, 9)))
    assert result.ok, result.summary() + "\n" + "\n".join(result.events)
    assert len(result.faults) >= 3, result.summary()
    assert result.verdict.batches_acked > 0
    assert result.verdict.records_checked > 0


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
