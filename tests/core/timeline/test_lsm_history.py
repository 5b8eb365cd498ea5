"""The LSM timeline history (table versions 8 and 9): Hudi's own histories read, ours written like them.

The judges are Hudi's files: the fixtures' history folders (data tables and metadata tables), read here
with pyarrow and ``json`` directly as well as through the module, and their Parquet footers, which ours must
match. Tables are changed only in copies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from hoodie.config import TIMELINE_HISTORY_PATH, TableConfig
from hoodie.errors import CorruptTimelineFile, InvalidWriteConfig, UnsupportedTable
from hoodie.metadata import MetadataTableConfig
from hoodie.storage import Storage
from hoodie.storage.arrow_fs import ArrowFsBackend
from hoodie.timeline.archived import ArchivedInstant, StateFile
from hoodie.timeline.archived.lsm import (
    ARROW_SCHEMA,
    AVRO_SCHEMA,
    LsmFileName,
    Manifest,
    ManifestEntry,
    _move_version,
    compact_and_clean_lsm,
    encode_lsm_file,
    history_folder,
    latest_manifest,
    latest_version,
    lsm_instants_of,
    manifest_versions,
    read_lsm_history,
    write_lsm_batch,
)
from hoodie.timeline.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT, Instant, State
from hoodie.timeline.metadata import (
    decode_clean_metadata,
    decode_cleaner_plan,
    decode_commit_metadata,
    decode_compaction_plan,
    decode_requested_replace_metadata,
)
from hoodie.timeline.timeline import Timeline

REPO = Path(__file__).resolve().parents[3]

COW = "apache-hudi/hudi-v8-table-cow:hudi-v8-table-cow"
MOR = "apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor"
MAINTENANCE = "apache-hudi/hudi-v8-table-mor:hudi-v8-table-maintenance"
MDT = ".hoodie/metadata"
#: Every fixture table with a history, and its metadata table (which has one of its own).
HISTORIES = [
    pytest.param(table, sub, id=f"{table.rsplit(':', 1)[1]}{'-mdt' if sub else ''}")
    for table in (COW, MOR, MAINTENANCE)
    for sub in ("", MDT)
]


def _open(root: Path, sub: str = "") -> tuple[Storage, TableConfig]:
    storage = Storage.for_uri(str(root))
    if sub:
        storage = storage.child(sub)
        return storage, MetadataTableConfig.load(storage)
    return storage, TableConfig.load(storage)


def _rows_as_hudi_wrote_them(folder: Path) -> list[dict[str, Any]]:
    """The rows of the latest snapshot, read without the module: ``_version_``, its manifest, pyarrow."""
    version = int((folder / "_version_").read_text())
    manifest = json.loads((folder / f"manifest_{version}").read_text())
    rows: list[dict[str, Any]] = []
    for entry in manifest["files"]:
        path = folder / entry["fileName"]
        assert path.stat().st_size == entry["fileLen"]
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def _state_files(storage: Storage, config: TableConfig) -> list[StateFile]:
    timeline = Timeline.load(storage, config)
    return [
        StateFile(instant, name, storage.read(f"{timeline.folder}/{name}"))
        for entries in timeline.files.values()
        for instant, name in entries
    ]


def _row(n: int, *, metadata: bytes | None = b"meta", action: str = DELTA_COMMIT) -> ArchivedInstant:
    """A synthetic archived instant with requested time number ``n``."""
    instant = Instant(f"20260101{n:09d}", action, State.COMPLETED, f"20260102{n:09d}")
    return ArchivedInstant(instant, metadata=metadata, plan=None)


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


# -- reading Hudi's histories -----------------------------------------------------------------------------


def test_history_folder_follows_the_config(fixture_root: Callable[[str], Path]) -> None:
    _, config = _open(fixture_root(COW))
    assert history_folder(config) == ".hoodie/timeline/history"
    assert history_folder(config.updated({TIMELINE_HISTORY_PATH: "lsm"})) == ".hoodie/timeline/lsm"
    v6 = config.updated({"hoodie.table.version": "6", "hoodie.timeline.layout.version": "1"})
    with pytest.raises(UnsupportedTable, match="table version 6"):
        history_folder(v6)


@pytest.mark.parametrize(("table", "sub"), HISTORIES)
def test_reads_hudis_history(fixture_root: Callable[[str], Path], table: str, sub: str) -> None:
    root = fixture_root(table)
    storage, config = _open(root, sub)
    history = read_lsm_history(storage, config)
    expected = _rows_as_hudi_wrote_them(root / sub / ".hoodie/timeline/history")

    assert [r.time for r in history] == sorted(r["instantTime"] for r in expected)
    by_time = {r["instantTime"]: r for r in expected}
    for row in history:
        raw = by_time[row.time]
        assert row.instant == Instant(row.time, raw["action"], State.COMPLETED, raw["completionTime"])
        assert (row.metadata, row.plan) == (raw["metadata"], raw["plan"])
        assert row.instant.completion_time is not None
        assert row.instant.completion_time > row.time

    # What the archiver took must be older than what it left: the active timeline starts after the history.
    timeline = Timeline.load(storage, config)
    first_write = timeline.completed_writes()[0].time
    assert all(row.time < first_write for row in history)
    assert not {row.time for row in history} & {i.time for i in timeline}

    for row in history:
        assert row.instant.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, "clean", "rollback")
        assert row.metadata is not None
        if row.instant.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT):
            md = decode_commit_metadata(row.metadata, table_version=8, action=row.instant.action)
            assert md.operation_type
            assert md.write_stats or (sub and md.operation_type == "BULK_INSERT")  # MDT initialization
            assert md.replace == (row.instant.action == REPLACE_COMMIT)
        if row.instant.action == COMMIT and row.plan is not None:  # a compaction
            assert decode_compaction_plan(row.plan).operations
            assert md.operation_type == "COMPACT"
        elif row.instant.action == REPLACE_COMMIT:
            assert row.plan is not None
            assert decode_requested_replace_metadata(row.plan).clustering_plan is not None
        elif row.instant.action == "clean":
            decode_clean_metadata(row.metadata)
            assert row.plan is not None
            decode_cleaner_plan(row.plan)
        else:
            assert row.plan is None
    if not sub:
        assert {r.instant.action for r in history} >= {COMMIT if table == COW else DELTA_COMMIT}


def test_range_reads_prune_files_by_name(fixture_root: Callable[[str], Path], table_copy: Any) -> None:
    root = table_copy(fixture_root(MOR))
    storage, config = _open(root)
    everything = read_lsm_history(storage, config)
    times = [r.time for r in everything]
    assert len(times) == 5
    assert read_lsm_history(storage, config, start=times[0], end=times[2]) == everything[1:3]
    assert read_lsm_history(storage, config, start=times[3]) == everything[4:]
    assert read_lsm_history(storage, config, end=times[0]) == everything[:1]

    # Without the second file, a range inside the first still reads (the second is never opened) ...
    folder = root / ".hoodie/timeline/history"
    second = LsmFileName(times[2], times[4], 0).name
    (folder / second).unlink()
    assert read_lsm_history(storage, config, end=times[1]) == everything[:2]
    # ... and one that needs it names it.
    with pytest.raises(CorruptTimelineFile, match=second):
        read_lsm_history(storage, config)


def test_the_latest_version_falls_back_to_the_manifests(
    fixture_root: Callable[[str], Path], table_copy: Any
) -> None:
    root = table_copy(fixture_root(MOR))
    storage, config = _open(root)
    folder = root / ".hoodie/timeline/history"
    everything = read_lsm_history(storage, config)
    (folder / "_version_").write_text("1")
    assert read_lsm_history(storage, config) == everything[:2]  # snapshot 1 held the first file only
    (folder / "_version_").write_text("2\n")  # Integer.parseInt refuses it: the listing decides
    (folder / "manifest_7.tmp").write_text("not read")
    assert latest_version(storage, history_folder(config)) == 2
    (folder / "_version_").unlink()
    assert read_lsm_history(storage, config) == everything
    for name in ("manifest_1", "manifest_2"):
        (folder / name).unlink()
    assert latest_version(storage, history_folder(config)) == -1
    assert read_lsm_history(storage, config) == []


def test_corrupt_files_are_named(fixture_root: Callable[[str], Path], table_copy: Any) -> None:
    root = table_copy(fixture_root(MOR))
    storage, config = _open(root)
    folder = root / ".hoodie/timeline/history"
    listed = json.loads((folder / "manifest_2").read_text())["files"][0]["fileName"]
    (folder / listed).write_bytes(b"PAR1 not really")
    with pytest.raises(CorruptTimelineFile, match=listed):
        read_lsm_history(storage, config)
    (folder / "manifest_2").write_text('{"files": [ {"fileName": "../../hoodie.properties"} ]}')
    with pytest.raises(CorruptTimelineFile, match="manifest_2"):
        read_lsm_history(storage, config)
    (folder / "manifest_2").write_text("{ truncated")
    with pytest.raises(CorruptTimelineFile, match="manifest_2"):
        read_lsm_history(storage, config)
    (folder / "_version_").write_text("9")
    with pytest.raises(CorruptTimelineFile, match="manifest_9"):
        read_lsm_history(storage, config)


def test_manifests_print_as_jackson_does(fixture_root: Callable[[str], Path]) -> None:
    for table in (COW, MOR, MAINTENANCE):
        for sub in ("", MDT):
            folder = fixture_root(table) / sub / ".hoodie/timeline/history"
            for path in folder.glob("manifest_*"):
                data = path.read_bytes()
                assert Manifest.parse(data, where=str(path)).to_json() == data
    assert Manifest.parse(b"", where="m").files == ()
    assert Manifest().to_json() == b'{\n  "files" : [ ]\n}'


# -- what archival writes ---------------------------------------------------------------------------------


def _state(name: str, content: bytes = b"") -> StateFile:
    return StateFile(Instant.parse(name), name, content)


def test_rows_take_the_plan_hudi_takes() -> None:
    t = "20260101000000001"
    rows = lsm_instants_of(
        [
            # clean: the requested plan (not the inflight), the latest of two completed files
            _state(f"{t}.clean.requested", b"req"),
            _state(f"{t}.clean.inflight", b"inf"),
            _state(f"{t}_20260101000000005.clean", b"older"),
            _state(f"{t}_20260101000000009.clean", b"newer"),
            # clean without a requested file: the inflight's
            _state("20260101000000002.clean.inflight", b"inf"),
            _state("20260101000000002_20260101000000003.clean", b"done"),
            # compaction: the requested plan; the completed file's action
            _state("20260101000000003.compaction.requested", b"plan"),
            _state("20260101000000003.compaction.inflight"),
            _state("20260101000000003_20260101000000004.commit", b"md"),
            # a compaction whose requested file is gone: no plan (the inflight one is never taken)
            _state("20260101000000031.compaction.inflight", b"inf"),
            _state("20260101000000031_20260101000000032.commit", b"md"),
            # log compaction: the requested plan
            _state("20260101000000004.logcompaction.requested", b"lplan"),
            _state("20260101000000004.logcompaction.inflight"),
            _state("20260101000000004_20260101000000005.deltacommit", b"md"),
            # clustering with an empty inflight: the requested plan
            _state("20260101000000005.clustering.requested", b"cplan"),
            _state("20260101000000005.clustering.inflight"),
            _state("20260101000000005_20260101000000006.replacecommit", b"md"),
            # insert overwrite: the inflight's commit metadata wins over the requested file
            _state("20260101000000006.replacecommit.requested", b"req"),
            _state("20260101000000006.replacecommit.inflight", b"inflight-md"),
            _state("20260101000000006_20260101000000007.replacecommit", b"md"),
            # both empty: no plan
            _state("20260101000000007.replacecommit.requested"),
            _state("20260101000000007.replacecommit.inflight"),
            _state("20260101000000007_20260101000000008.replacecommit", b"md"),
            # a write: no plan; an empty completed file: no metadata
            _state("20260101000000008.deltacommit.requested"),
            _state("20260101000000008.deltacommit.inflight", b"inflight-md"),
            _state("20260101000000008_20260101000000009.deltacommit"),
            # pending only: no row
            _state("20260101000000009.deltacommit.requested"),
            _state("20260101000000009.deltacommit.inflight", b"x"),
        ]
    )
    got = [(r.time[-1], r.instant.action, r.instant.completion_time, r.metadata, r.plan) for r in rows]
    assert got == [
        ("1", "clean", "20260101000000009", b"newer", b"req"),
        ("2", "clean", "20260101000000003", b"done", b"inf"),
        ("3", "commit", "20260101000000004", b"md", b"plan"),
        ("4", "deltacommit", "20260101000000005", b"md", b"lplan"),
        ("5", "replacecommit", "20260101000000006", b"md", b"cplan"),
        ("6", "replacecommit", "20260101000000007", b"md", b"inflight-md"),
        ("7", "replacecommit", "20260101000000008", b"md", None),
        ("8", "deltacommit", "20260101000000009", None, None),
        ("1", "commit", "20260101000000032", b"md", None),  # ...031
    ]
    assert all(r.instant.state is State.COMPLETED for r in rows)


def test_rows_of_a_real_timeline(fixture_root: Callable[[str], Path]) -> None:
    storage, config = _open(fixture_root(MAINTENANCE))
    states = _state_files(storage, config)
    rows = {r.time: r for r in lsm_instants_of(states)}
    assert sorted(rows) == sorted({s.instant.time for s in states if s.instant.state is State.COMPLETED})
    content = {(s.instant.time, s.instant.state, s.instant.action): s.content for s in states}
    requested = {s.instant.time: s.instant.action for s in states if s.instant.state is State.REQUESTED}
    for time, row in rows.items():
        assert row.metadata == content[(time, State.COMPLETED, row.instant.action)]
        if requested[time] in ("compaction", "clustering", "clean"):
            assert row.plan == content[(time, State.REQUESTED, requested[time])]
            assert row.plan
        else:
            assert row.plan is None
    assert {requested[t] for t in rows} >= {"compaction", "clustering", "clean"}


@pytest.mark.parametrize(("table", "sub"), HISTORIES)
def test_round_trip_through_our_files(
    fixture_root: Callable[[str], Path], table_copy: Any, table: str, sub: str
) -> None:
    source = fixture_root(table)
    root = table_copy(source)
    storage, config = _open(root, sub)
    folder = root / sub / ".hoodie/timeline/history"
    before = read_lsm_history(storage, config)
    version, manifest = latest_manifest(storage, history_folder(config))
    new_rows = lsm_instants_of(_state_files(storage, config))

    name = write_lsm_batch(storage, config, new_rows)

    assert name == f"{new_rows[0].time}_{new_rows[-1].time}_0.parquet"
    assert read_lsm_history(storage, config) == sorted([*before, *new_rows], key=lambda r: r.time)
    assert (folder / "_version_").read_bytes() == str(version + 1).encode()
    written = json.loads((folder / f"manifest_{version + 1}").read_text())["files"]
    assert [(f["fileName"], f["fileLen"]) for f in written] == [
        *((e.file_name, e.file_len) for e in manifest.files),
        (name, (folder / name).stat().st_size),
    ]

    # Our file looks like Hudi's to a Parquet reader: schema, nullability, types, footer keys.
    ours = pq.read_metadata(folder / name)
    hudis = pq.read_metadata(folder / manifest.names[0])
    assert pq.read_schema(folder / name) == pq.read_schema(folder / manifest.names[0])
    assert pq.read_schema(folder / name).metadata == pq.read_schema(folder / manifest.names[0]).metadata
    assert ours.metadata == hudis.metadata
    assert json.loads(ours.metadata[b"parquet.avro.schema"]) == json.loads(AVRO_SCHEMA)
    assert ours.format_version == hudis.format_version

    def columns(md: Any) -> list[tuple[Any, ...]]:
        return [
            (
                c.name,
                c.physical_type,
                str(c.logical_type),
                c.converted_type,
                c.max_definition_level,
                c.max_repetition_level,
            )
            for c in md.schema
        ]

    assert columns(ours) == columns(hudis)
    assert {ours.row_group(0).column(i).compression for i in range(6)} == {"GZIP"}
    assert pq.read_table(folder / name).column("version").to_pylist() == [1] * len(new_rows)

    # Committed already: nothing happens the second time.
    assert write_lsm_batch(storage, config, new_rows) is None
    assert latest_version(storage, history_folder(config)) == version + 1
    assert manifest_versions(storage, history_folder(config))[-1] == version + 1


def test_a_torn_file_and_a_leftover_manifest_are_replaced(
    fixture_root: Callable[[str], Path], table_copy: Any
) -> None:
    root = table_copy(fixture_root(COW))
    storage, config = _open(root)
    folder = root / ".hoodie/timeline/history"
    before = read_lsm_history(storage, config)
    rows = [_row(1), _row(2)]
    target = f"{rows[0].time}_{rows[-1].time}_0.parquet"
    (folder / target).write_bytes(b"half a parquet file")
    (folder / f".{target}.crc").write_bytes(b"stale")
    (folder / "manifest_2").write_text("left by a crash before _version_ was written")

    assert write_lsm_batch(storage, config, rows) == target

    assert read_lsm_history(storage, config) == [*before, *rows]
    assert f".{target}.crc" not in _files(folder)
    assert Manifest.parse((folder / "manifest_2").read_bytes(), where="manifest_2").names == (
        "20251021220754468_20251021220800584_0.parquet",
        target,
    )
    assert (folder / "_version_").read_text() == "2"
    with pytest.raises(ValueError, match="at least one"):
        write_lsm_batch(storage, config, [])
    pending = ArchivedInstant(Instant("20260101000000099", DELTA_COMMIT, State.INFLIGHT))
    with pytest.raises(ValueError, match="completed"):
        write_lsm_batch(storage, config, [pending])


def test_the_first_row_of_a_time_wins(fixture_root: Callable[[str], Path], table_copy: Any) -> None:
    root = table_copy(fixture_root(COW))
    storage, config = _open(root)
    before = read_lsm_history(storage, config)
    again = ArchivedInstant(before[0].instant, metadata=b"a second copy", plan=None)
    assert write_lsm_batch(storage, config, [again]) is not None
    assert read_lsm_history(storage, config) == before  # the older file comes first in the manifest


def test_codecs(fixture_root: Callable[[str], Path], table_copy: Any) -> None:
    root = table_copy(fixture_root(COW))
    storage, config = _open(root)
    folder = root / ".hoodie/timeline/history"
    for n, codec in enumerate(("snappy", "ZSTD", "uncompressed")):
        name = write_lsm_batch(storage, config, [_row(n)], compression=codec)
        assert name is not None
        expected = "UNCOMPRESSED" if codec == "uncompressed" else codec.upper()
        assert pq.read_metadata(folder / name).row_group(0).column(0).compression == expected
    assert [r.time for r in read_lsm_history(storage, config)][-3:] == [_row(n).time for n in range(3)]
    with pytest.raises(InvalidWriteConfig, match="lzo"):
        write_lsm_batch(storage, config, [_row(7)], compression="lzo")


_KILLED_WRITE = """
import sys
from hoodie.config import TableConfig
from hoodie.storage import Storage
from hoodie.storage.arrow_fs import ArrowFsBackend
from hoodie.timeline.archived import ArchivedInstant
from hoodie.timeline.archived.lsm import write_lsm_batch
from hoodie.timeline.instant import Instant, State
storage = Storage.for_uri(sys.argv[1])
rows = [ArchivedInstant(Instant("20260101000000001", "commit", State.COMPLETED, "20260101000000002"), b"m")]
write_lsm_batch(storage, TableConfig.load(storage), rows)
"""


@pytest.mark.parametrize("point", ["archival.after_history_parquet", "archival.after_history_manifest"])
def test_a_killed_batch_is_invisible_then_committed_again(
    fixture_root: Callable[[str], Path], table_copy: Any, point: str
) -> None:
    root = table_copy(fixture_root(COW))
    storage, config = _open(root)
    before = read_lsm_history(storage, config)
    env = {**os.environ, "HOODIE_FAILPOINTS": point, "PYTHONPATH": f"{REPO / 'core'}:{REPO / 'services'}"}
    env.pop("HOODIE_FAILPOINT_PID", None)
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITE, str(root)], env=env, check=False)
    assert done.returncode == -9

    folder = root / ".hoodie/timeline/history"
    assert "20260101000000001_20260101000000001_0.parquet" in _files(folder)
    committed = point == "archival.after_history_manifest"
    assert ("manifest_2" in _files(folder)) == committed
    assert read_lsm_history(storage, config) == before  # _version_ still names snapshot 1

    row = ArchivedInstant(Instant("20260101000000001", COMMIT, State.COMPLETED, "20260101000000002"), b"m")
    # Killed after its manifest (the commit point): the next run publishes that snapshot and finds the batch
    # in it; killed before: the torn file goes and the batch is written again.
    assert (write_lsm_batch(storage, config, [row]) is None) == committed
    assert read_lsm_history(storage, config) == [*before, row]
    assert (folder / "_version_").read_text() == "2"


def test_a_writer_never_deletes_a_snapshot_another_writer_committed(
    fixture_root: Callable[[str], Path], table_copy: Any
) -> None:
    """Issue 33, case 2: a writer whose view was older found ``manifest_<V+1>`` (another writer's commit,
    ``_version_`` not moved yet), deleted it as a crash's leftover, wrote its own and moved ``_version_``:
    the other writer's archived instants vanished from the history. Now the snapshot is published and built
    upon; ``_version_`` never moves back."""
    root = table_copy(fixture_root(COW))
    storage, config = _open(root)
    folder = history_folder(config)
    before = read_lsm_history(storage, config)
    version, manifest = latest_manifest(storage, folder)
    theirs = ArchivedInstant(Instant("20260101000000001", COMMIT, State.COMPLETED, "20260101000000002"), b"a")
    ours = ArchivedInstant(Instant("20260101000000003", COMMIT, State.COMPLETED, "20260101000000004"), b"b")
    # The other writer: its data file and its manifest (the commit point), then it pauses before _version_.
    name = LsmFileName(theirs.time, theirs.time, 0).name
    data = encode_lsm_file(pa.table({
        "instantTime": [theirs.instant.time], "completionTime": [theirs.instant.completion_time],
        "action": [theirs.instant.action], "metadata": [theirs.metadata], "plan": [None], "version": [1],
    }, schema=ARROW_SCHEMA))  # fmt: skip
    storage.create(f"{folder}/{name}", data)
    storage.create(
        f"{folder}/manifest_{version + 1}", manifest.updated((), ManifestEntry(name, len(data))).to_json()
    )
    assert write_lsm_batch(storage, config, [ours]) is not None
    assert storage.exists(f"{folder}/manifest_{version + 1}")
    assert latest_version(storage, folder) == version + 2
    assert read_lsm_history(storage, config) == [*before, theirs, ours]
    # The other writer wakes and moves _version_ to the snapshot it made: a compare-and-set that finds a
    # later version leaves it where it is.
    _move_version(storage, folder, version + 1)
    assert latest_version(storage, folder) == version + 2


# -- compaction and clean ---------------------------------------------------------------------------------


def _check_no_unreferenced_files(folder: Path, storage: Storage, config: TableConfig, retained: int) -> None:
    versions = manifest_versions(storage, history_folder(config))
    assert len(versions) <= retained
    assert int((folder / "_version_").read_text()) == versions[-1]
    needed = {"_version_", *(f"manifest_{v}" for v in versions)}
    for v in versions:
        needed |= set(Manifest.parse((folder / f"manifest_{v}").read_bytes(), where=str(v)).names)
    present = _files(folder)
    crcs = {n for n in present if n.endswith(".crc")}
    assert present - crcs == needed
    assert all(n[1 : -len(".crc")] in present for n in crcs)


def test_compaction_builds_level_one_files(fixture_root: Callable[[str], Path], table_copy: Any) -> None:
    root = table_copy(fixture_root(COW))
    storage, config = _open(root)
    folder = root / ".hoodie/timeline/history"
    expected = read_lsm_history(storage, config)
    compactions = []
    for batch in range(25):
        rows = [_row(batch * 3 + i, metadata=bytes([batch]) * (100 + i)) for i in range(3)]
        assert write_lsm_batch(storage, config, rows) is not None
        expected += rows
        compactions.append(compact_and_clean_lsm(storage, config, batch_size=10))
        _check_no_unreferenced_files(folder, storage, config, retained=3 + compactions[-1])

    # The fixture's file and 25 batches: the 10th and 20th level-0 files triggered a compaction each.
    assert [i for i, c in enumerate(compactions) if c] == [8, 18]
    assert compactions[8] == compactions[18] == 1
    _, manifest = latest_manifest(storage, history_folder(config))
    levels = [LsmFileName.parse(n).level for n in manifest.names]
    assert sorted(levels) == [0] * 6 + [1] * 2
    first = LsmFileName("20251021220754468", _row(26).time, 1).name
    second = LsmFileName(_row(27).time, _row(56).time, 1).name
    assert manifest.names[:2] == (first, second)  # appended as made; the level-0 files after them
    assert len(manifest_versions(storage, history_folder(config))) == 3
    assert read_lsm_history(storage, config) == expected
    # A compacted file holds its inputs' rows, file after file.
    assert pq.read_table(folder / second).column("instantTime").to_pylist() == [
        _row(n).time for n in range(27, 57)
    ]
    level_zero = folder / manifest.names[-1]
    assert pq.read_metadata(folder / second).metadata == pq.read_metadata(level_zero).metadata


def _empty_table(tmp_path: Path, fixture_root: Callable[[str], Path]) -> Path:
    """A v8 table (the COW fixture's config) with nothing on its timeline and no history yet."""
    root = tmp_path / "t"
    (root / ".hoodie").mkdir(parents=True)
    (root / ".hoodie/hoodie.properties").write_bytes(
        (fixture_root(COW) / ".hoodie/hoodie.properties").read_bytes()
    )
    return root


def test_compaction_candidates_respect_the_size_limit(
    tmp_path: Path, fixture_root: Callable[[str], Path]
) -> None:
    root = _empty_table(tmp_path, fixture_root)
    storage, config = _open(root)
    write_lsm_batch(storage, config, [_row(0, metadata=os.urandom(50_000))])
    for n in range(1, 10):
        write_lsm_batch(storage, config, [_row(n)])
    _, manifest = latest_manifest(storage, history_folder(config))
    sizes = [e.file_len for e in manifest.files]
    # The first file alone passes the limit: dropped, and the walk goes on; the fourth small one passes it
    # with three taken, and ends the run (itself included).
    limit = sum(sizes[1:4])
    assert sizes[0] > limit

    assert compact_and_clean_lsm(storage, config, batch_size=10, max_file_bytes=limit) == 1

    _, manifest = latest_manifest(storage, history_folder(config))
    compacted = LsmFileName(_row(1).time, _row(4).time, 1).name
    assert manifest.names[-1] == compacted
    assert {LsmFileName.parse(n).min_time for n in manifest.names[:-1]} == {
        _row(n).time for n in (0, 5, 6, 7, 8, 9)
    }
    assert [r.time for r in read_lsm_history(storage, config)] == [_row(n).time for n in range(10)]
    # Fewer than batch_size files of a level: nothing to do.
    assert compact_and_clean_lsm(storage, config, batch_size=10) == 0


def test_compaction_cascades_and_the_clean_keeps_its_versions(
    tmp_path: Path, fixture_root: Callable[[str], Path]
) -> None:
    root = _empty_table(tmp_path, fixture_root)
    storage, config = _open(root)
    folder = root / ".hoodie/timeline/history"
    assert compact_and_clean_lsm(storage, config) == 0  # no history at all
    done = []
    for n in range(4):
        write_lsm_batch(storage, config, [_row(n)])
        done.append(compact_and_clean_lsm(storage, config, batch_size=2, retained_versions=1))
    assert done == [0, 1, 0, 2]  # the fourth: two level-0 files -> level 1, then two level-1 -> level 2
    _, manifest = latest_manifest(storage, history_folder(config))
    assert manifest.names == (LsmFileName(_row(0).time, _row(3).time, 2).name,)
    assert manifest_versions(storage, history_folder(config)) == [5, 6, 7]  # 1 + 2 compactions kept
    _check_no_unreferenced_files(folder, storage, config, retained=3)
    assert read_lsm_history(storage, config) == [_row(n) for n in range(4)]


def test_a_storage_without_create_if_absent(tmp_path: Path, fixture_root: Callable[[str], Path]) -> None:
    """Where the storage cannot create-if-absent (pyarrow file systems, HDFS), archival runs under the
    table lock and the history is written with a check then an overwrite; no ``.crc`` files are touched."""
    root = _empty_table(tmp_path, fixture_root)
    remote = Storage(ArrowFsBackend(pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())), "", "sub://t")
    assert not remote.conditional_create
    _, config = _open(root)
    folder = root / ".hoodie/timeline/history"
    for n in range(3):
        write_lsm_batch(remote, config, [_row(n)])
    (folder / "manifest_4").write_text("left by a crash")
    write_lsm_batch(remote, config, [_row(3)])
    assert compact_and_clean_lsm(remote, config, batch_size=4) == 1
    assert read_lsm_history(remote, config) == [_row(n) for n in range(4)]
    assert latest_manifest(remote, history_folder(config))[1].names == (
        LsmFileName(_row(0).time, _row(3).time, 1).name,
    )


def test_empty_history_folder_reads_empty(tmp_path: Path, fixture_root: Callable[[str], Path]) -> None:
    root = _empty_table(tmp_path, fixture_root)
    storage, config = _open(root)
    assert read_lsm_history(storage, config) == []
    assert latest_manifest(storage, history_folder(config)) == (-1, Manifest())
