"""What every clean must preserve, shared by the clean tests: hudi-rs's latest snapshot and its time travel to
every retained commit read exactly as before, the planned files are gone, and storage shrank by what the
plan said; and the files a clean keeping one version would leave (:func:`files_outside_live_slices`)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from hoodie import Table
from hoodie.clean.execute import plan_files
from hoodie.storage import Storage
from hoodie.timeline.instant import CLEAN, State
from hoodie.timeline.metadata import CleanerPlan, CleanMetadata, decode_clean_metadata
from support.compaction_checks import key_columns
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleRows, Query


def data_bytes(root: Path | str) -> int:
    """Bytes of data files (outside ``.hoodie``)."""
    storage = Storage.for_uri(str(root))
    listing = storage.list("", recursive=True)
    return sum(f.size for f in listing if not f.is_dir and f.path.split("/")[0] != ".hoodie")


def files_outside_live_slices(root: Path | str) -> list[str]:
    """Data files (outside ``.hoodie``, partition metafiles aside) that no file slice of the table's latest
    view holds: what a clean keeping one version of each file group must leave none of."""
    table = Table.open(str(root))
    live = {p for s in table.file_slices() for p in (s.base_file_path, *s.log_file_paths) if p}
    on_storage = [
        f.path
        for f in table.storage.list("", recursive=True)
        if not f.is_dir and f.path.split("/")[0] != ".hoodie" and not f.name.startswith(".hoodie_partition")
    ]
    return sorted(p for p in on_storage if p not in live)


@dataclass(frozen=True)
class Reads:
    """hudi-rs's answers before the clean: the latest snapshot and time travel to each completed write."""

    latest: pa.Table
    as_of: dict[str, pa.Table]
    data_bytes: int


def _ask(root: Path | str, queries: list[Query]) -> list[pa.Table]:
    with tempfile.TemporaryDirectory(prefix="hoodie-oracle-") as work:
        answers = HudiOracle(Path(work)).run(root, queries)
    out = []
    for q, a in zip(queries, answers, strict=True):
        assert isinstance(a, OracleRows), f"hudi-rs could not answer {q}: {a}"
        out.append(a.table)
    return out


def capture_reads(root: Path | str) -> Reads:
    table = Table.open(str(root))
    times = [w.time for w in table.timeline.completed_writes()]
    answers = _ask(root, [Query.snapshot(), *(Query.snapshot(as_of=t) for t in times)])
    return Reads(answers[0], dict(zip(times, answers[1:], strict=True)), data_bytes(root))


def check_clean(
    root: Path | str, before: Reads, instant_time: str, plan: CleanerPlan, context: str
) -> CleanMetadata:
    """Check the table after clean ``instant_time`` of ``plan`` completed; returns its metadata."""
    table = Table.open(str(root))
    instant = table.timeline.get(instant_time)
    assert instant is not None, context
    assert instant.state is State.COMPLETED, context
    assert instant.action == CLEAN, context
    md = decode_clean_metadata(table.storage.read(table.timeline.file_of(instant_time)))
    files = plan_files(plan)
    planned = [p for paths in files.values() for p in paths]
    for path in planned:
        assert not table.storage.exists(path), f"{context}: {path} was planned for deletion but still exists"
    assert md.total_files_deleted == len(planned), context
    assert md.earliest_commit_to_retain == (
        plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else ""
    )
    for partition, paths in files.items():
        pmd = md.partition_metadata[partition]
        assert sorted(pmd.success_delete_files) == sorted(p.rsplit("/", 1)[-1] for p in paths), context
        assert pmd.failed_delete_files == ()
        assert pmd.policy == plan.policy
    ectr = plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else None
    retained = [t for t in before.as_of if ectr is None or t >= ectr] if ectr else []
    answers = _ask(root, [Query.snapshot(), *(Query.snapshot(as_of=t) for t in retained)])
    keys = key_columns(table, before.latest)
    assert_same_rows(answers[0], before.latest, keys, context=f"{context}: latest snapshot")
    for t, after in zip(retained, answers[1:], strict=True):
        assert_same_rows(after, before.as_of[t], keys, context=f"{context}: time travel to {t}")
    ours = table.read()
    assert_same_rows(ours, before.latest, keys, context=f"{context}: our reader", check_types=False)
    return md
