"""Compaction as a real Spark job (local mode) and through ``hoodied compact``: tables of every version
compact with nothing changed for readers (hudi-rs and ours); a failed task rolls the attempt back; a process
killed with SIGKILL at any step leaves a readable table with no stray base file, and the next run finishes
the job; a writer upserting from another process while compaction runs loses no update."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie import Table
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.service import COMPACTION
from hoodie.failpoints import ENV as FAILPOINTS
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import ROLLBACK, State
from hoodied.claims import LocalClaim
from hoodied.cli import main
from hoodied.errors import JobFailed
from hoodied.jobs import run_service_job
from support.compaction_checks import capture, check_after

pytestmark = pytest.mark.spark


def _generate(root: Path, version: int, partitions: int, log_format: str = "avro", rows: int = 300) -> None:
    generate_table(
        str(root),
        GenerateSpec(
            table_version=version,
            rows=rows,
            commits=4,
            update_fraction=0.3,
            delete_fraction=0.1,
            partitions=partitions,
            log_format=log_format,  # type: ignore[arg-type]
            seed=21,
        ),
    )


@pytest.mark.parametrize(
    ("version", "partitions", "log_format"),
    [
        pytest.param(6, 2, "avro", id="v6-partitioned-avro"),
        pytest.param(8, 0, "parquet", id="v8-unpartitioned-parquet"),
        pytest.param(9, 3, "parquet", id="v9-partitioned-parquet"),
    ],
)
def test_spark_job_compacts_every_planned_slice(
    spark: Any, tmp_path: Path, version: int, partitions: int, log_format: str
) -> None:
    root = tmp_path / "t"
    _generate(root, version, partitions, log_format)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture(root)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    T = scheduled.instant.time
    with LocalClaim(storage, "compaction", T) as claim:
        job = run_service_job(spark, COMPACTION, storage, lock, fence=claim.check)
    md = check_after(root, before, T, f"spark v{version}")
    assert len(md.write_stats) == len(scheduled.plan.operations)
    # Write tokens: Spark's partition id, the run's attempt number (one for every task), the task attempt id.
    tokens = {s.path.rsplit("_", 2)[-2] for s in md.write_stats if s.path}
    assert len(tokens) == len(md.write_stats)
    assert {int(t.split("-")[0]) for t in tokens} == set(range(len(md.write_stats)))
    assert len({t.split("-")[1] for t in tokens}) == 1  # one run: one attempt number
    assert job.done.records == sum(s.num_writes or 0 for s in md.write_stats)


def test_a_failed_task_rolls_the_attempt_back_to_requested(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8, 2)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.plan is not None
    assert scheduled.instant is not None
    T = scheduled.instant.time
    # A log file the plan names disappears (deleted by hand, say): that slice's task fails.
    op = scheduled.plan.operations[-1]
    victim = root / op.partition_path / op.delta_file_paths[0]
    victim.unlink()
    with pytest.raises(JobFailed, match=f"compaction {T}") as failure:
        run_service_job(spark, COMPACTION, storage, lock)
    assert "rolled back to requested" in str(failure.value)
    timeline = Table.open(str(root)).timeline
    assert timeline.get(T).state is State.REQUESTED  # type: ignore[union-attr]
    assert [i.action for i in timeline.completed() if i.action == ROLLBACK] == [ROLLBACK]
    assert not list(root.rglob(f"*_{T}.parquet")), "files of the failed attempt are left"
    Table.open(str(root)).read()  # still readable


def _cli(root: Path, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(FAILPOINTS, None)
    if failpoint:
        env[FAILPOINTS] = failpoint
    cmd = [sys.executable, "-m", "hoodied.cli", "compact", str(root), *args]
    cmd += ["--spark-master", "local[2]", "--conf", "hoodie.write.lock.filesystem.expire=0.05"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


#: Every step in the campaign; by default a kill while the tasks write and one during the commit (the core's
#: in-process kill tests cover every step of the same code).
SHORT = ("compaction.task_after_write", "compaction.during_commit")
POINTS = [
    pytest.param(point, marks=() if point in SHORT else (pytest.mark.campaign,))
    for point in (
        "compaction.after_schedule",
        "compaction.after_inflight",
        "compaction.task_after_write",
        "compaction.before_commit",
        "compaction.during_commit",
        "compaction.after_commit",
    )
]


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_any_step_leaves_a_correct_table_and_the_next_run_finishes(
    tmp_path: Path, point: str
) -> None:
    root = tmp_path / "t"
    _generate(root, 8, 2)
    before = capture(root)
    killed = _cli(root, "--mode", "schedule-and-execute", failpoint=point)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    # Right after the kill: readers see exactly what they saw before (no stray file is visible).
    table = Table.open(str(root))
    pending = table.timeline.pending_compactions()
    done = [i for i in table.timeline.completed() if table.timeline.was_compaction(i.time)]
    assert len(pending) + len(done) == 1, (pending, done)
    T = (pending or done)[0].time
    now = capture(root)
    assert now.ours.num_rows == before.ours.num_rows
    assert now.theirs is not None
    assert before.theirs is not None
    assert sorted(now.theirs.column("_hoodie_record_key").to_pylist()) == sorted(
        before.theirs.column("_hoodie_record_key").to_pylist()
    )
    # The next run finishes (rolling back what the dead one left) and the table is as it must be.
    rerun = _cli(root, "--mode", "execute")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    if done:
        assert "no pending compaction" in rerun.stdout
    else:
        assert f"completed compaction {T}" in rerun.stdout
    check_after(root, before, T, f"killed at {point}")


WRITER = """
import json, sys
import pyarrow as pa
import pyarrow.compute as pc
from hoodie import Table
from hoodie.errors import WriteConflict
from hoodie.testing.table_writer import TableWriter

root, batches, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
writer = TableWriter.open(root)
written = {}
for b in range(batches):
    full = Table.open(root).read().sort_by("uuid")
    start = (b * 37) % max(1, full.num_rows - 60)
    upd = full.slice(start, 60).drop_columns([c for c in full.column_names if c.startswith("_hoodie_")])
    fares = pa.array([float(10_000 + b * 100 + i) for i in range(upd.num_rows)])
    upd = upd.set_column(upd.schema.get_field_index("fare"), "fare", fares)
    upd = upd.set_column(upd.schema.get_field_index("ts"), "ts", pc.add(upd.column("ts"), 1_000_000_000))
    for attempt in range(20):
        try:
            writer.upsert(upd)
            break
        except WriteConflict:
            continue
    else:
        raise SystemExit("could not commit a batch in 20 attempts")
    written.update(zip(upd.column("uuid").to_pylist(), upd.column("fare").to_pylist()))
with open(out, "w") as f:
    json.dump(written, f)
"""


@pytest.mark.slow
@pytest.mark.parametrize("version", [6, 8])
def test_a_concurrent_writer_loses_no_update(spark: Any, tmp_path: Path, version: int) -> None:
    root = tmp_path / "t"
    _generate(root, version, 2, rows=600)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    out = tmp_path / "written.json"
    log = tmp_path / "writer.log"
    with log.open("w") as log_file:
        writer = subprocess.Popen([sys.executable, str(script), str(root), "8", str(out)], stderr=log_file)
    compacted: list[tuple[str, bool]] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            finished = writer.poll() is not None
            scheduled = schedule_compaction(storage, lock)
            if scheduled.instant is not None:
                with LocalClaim(storage, "compaction", scheduled.instant.time) as claim:
                    run_service_job(spark, COMPACTION, storage, lock, fence=claim.check)
                compacted.append((scheduled.instant.time, writer.poll() is None))
            if finished:
                break
            time.sleep(0.2)
    finally:
        if writer.poll() is None:
            writer.wait(timeout=300)
    assert writer.returncode == 0, log.read_text()
    assert any(running for _, running in compacted), f"no compaction overlapped the writer: {compacted}"
    written: dict[str, float] = json.loads(out.read_text())
    final = Table.open(str(root)).read()
    fares = dict(zip(final.column("uuid").to_pylist(), final.column("fare").to_pylist(), strict=True))
    lost = {k: (v, fares.get(k)) for k, v in written.items() if fares.get(k) != v}
    assert not lost, f"{len(lost)} update(s) lost, e.g. {list(lost.items())[:3]}"
    # hudi-rs reads the same final table.
    after = capture(root)
    assert after.theirs is not None
    theirs = dict(
        zip(after.theirs.column("uuid").to_pylist(), after.theirs.column("fare").to_pylist(), strict=True)
    )
    assert {k: theirs.get(k) for k in written} == written


def test_cli_schedule_then_execute_and_nothing_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "t"
    _generate(root, 9, 0)
    assert main(["compact", str(root), "--mode", "schedule", "--strategy", "UnBounded"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scheduled compaction ")
    assert main(["compact", str(root), "--mode", "schedule"]) == 0
    assert "no compaction scheduled" in capsys.readouterr().out
    assert main(["compact", str(root), "--mode", "execute", "--conf", "spark.foo"]) == 1
    assert "key=value" in capsys.readouterr().err
    assert main(["compact", str(root), "--mode", "execute", "--conf", "other.key=1"]) == 1
    assert main(["compact", str(root), "--mode", "schedule", "--strategy", "Nope"]) == 2
    assert "hoodie.compaction.strategy" in capsys.readouterr().err


@pytest.mark.slow
def test_a_task_failure_prints_one_clear_line_and_no_traceback(tmp_path: Path) -> None:
    """Damaged committed data stops the CLI's compaction with one ``hoodied: error:`` line naming the file;
    Spark's per-task Python tracebacks are not printed (hoodied reports the failure itself)."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=200, commits=3, partitions=1, seed=2))
    log = next(p for p in sorted(root.rglob(".*.log.*")) if ".hoodie" not in p.relative_to(root).parts)
    data = bytearray(log.read_bytes())
    data[12] ^= 0x01
    log.write_bytes(bytes(data))
    done = _cli(root, "--mode", "schedule-and-execute")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("hoodied: error:")]
    assert len(errors) == 1, done.stderr
    assert "CorruptLogBlock" in errors[0]
    assert str(log.relative_to(root)) in errors[0]
