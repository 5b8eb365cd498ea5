"""The backlog's figures agree with the triggers that act on them (issue 35: ``hoodied status`` said "1
commit(s) since clean" beside "clean trigger fires: 2 commit(s) since the last clean")."""

from __future__ import annotations

from pathlib import Path

from hoodie import Table
from hoodie.backlog import BacklogCache, measure_backlog
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, clean_due, schedule_clean
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter


def test_a_write_completed_while_a_clean_was_planned_counts_as_the_trigger_counts_it(tmp_path: Path) -> None:
    """A compaction requested before a clean and completed after it has a time before the clean's, but it
    completed after the clean's ``lastCompletedCommitTimestamp``: the clean trigger counts it (Hudi's rule),
    and so does the backlog."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=80, commits=3, partitions=1, seed=3))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    assert schedule_compaction(storage, lock).instant is not None
    compact_in_process(storage, lock)  # the first slices become older versions a clean deletes
    gen = TripGenerator(3, 1)
    TableWriter.open(str(root)).upsert(gen.rows(gen.keys(20)))
    assert schedule_compaction(storage, lock).instant is not None  # requested before the clean
    config = CleanConfig(commits_retained=1)
    cleaned = schedule_clean(storage, lock, config=config)
    assert cleaned.instant is not None, cleaned.reason
    clean_in_process(storage, lock)
    compact_in_process(storage, lock)  # completes after the clean

    table = Table.open(str(root))
    cache = BacklogCache()
    backlog = measure_backlog(table, table.config.props, cache)
    due, why = clean_due(table, CleanConfig(max_commits=1))
    assert due, why
    assert why.startswith("1 commit(s) since the last clean"), why
    assert backlog.commits_since_clean == 1
    # The boundary is read once per clean: measured again, nothing is read.
    table.storage.read = None  # type: ignore[method-assign]
    assert measure_backlog(table, table.config.props, cache).commits_since_clean == 1
