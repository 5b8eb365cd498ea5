"""Every table service on a copy of every supported fixture table, judged by hudi-rs.

For each table (every one ``../shared/fixtures`` holds that we support, not a chosen subset) the services run
one after another on one copy, as a daemon would keep it: compaction (every slice with log files), clean
(keep the latest commit), clustering (every file group, sorted by the record key) and indexing (every index
hoodied builds that the table lacks). Before and after each, hudi-rs answers the snapshot, the
read-optimized query and a time travel to every write the service may not change; the answers after must
equal those before (on every column but ``_hoodie_file_name``, which names the rewritten files). The
read-optimized query may change only into the snapshot, where a rewrite merged log files into base files.
Where hudi-rs cannot answer (it panics on the local-timestamp types of the ``trips_logical_types_json_*``
tables and cannot merge the logs of ``hudi_comprehensive_types_v6_mor``), our answer before is the
reference: test_conformance checks those against rows stated independently.

A service does its work or finds nothing to do (the reason it gives is recorded; compaction does not apply
to COPY_ON_WRITE tables); none may refuse a supported table. ``HOODIED_SWEEP_REPORT=<file>`` appends one JSON
line per table and service (outcome, reason, seconds): the figures of the sweep.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.errors import HoodieError
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from support.fixture_tables import FixtureTable
from support.service_checks import SERVICES, Outcome, judge, read_all, run_service

pytestmark = [pytest.mark.fixtures, pytest.mark.slow]


def _report(table_id: str, outcomes: list[Outcome]) -> None:
    path = os.environ.get("HOODIED_SWEEP_REPORT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for o in outcomes:
            f.write(json.dumps({"table": table_id, **o.__dict__}) + "\n")


def test_every_service_on_every_supported_fixture_table(
    supported_table: FixtureTable, table_copy: Callable[[FixtureTable | Path], Path]
) -> None:
    root = table_copy(supported_table)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    table = Table.open(str(root))
    writes = [w.time for w in table.timeline.completed_writes()]
    earliest = table.earliest_time_travel()
    reads = read_all(root, [t for t in writes if earliest is None or t >= earliest])
    outcomes: list[Outcome] = []
    failures: list[str] = []
    for service in SERVICES:
        context = f"{supported_table.id} {service}"
        started = time.monotonic()
        try:
            outcome, reason = run_service(service, storage, lock)
        except HoodieError as e:
            outcome, reason = "refused", f"{type(e).__name__}: {e}"
            failures.append(f"{context}: refused: {reason}")
        outcomes.append(Outcome(service, outcome, reason, round(time.monotonic() - started, 2)))
        if outcome == "done":
            try:
                reads = judge(root, reads, service, context)
            except AssertionError as e:
                failures.append(str(e))
                break
    _report(supported_table.id, outcomes)
    assert not failures, "\n\n".join(failures)
