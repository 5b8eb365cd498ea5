"""Fuzzing compaction with damaged committed log files: it never commits fewer or other records because of
damage it could have seen.

Each trial copies a table whose compaction is planned, flips one bit or one whole byte at a random offset of
one of the log files the plan compacts (committed files: Avro and Parquet data blocks, delete blocks, rollback
command blocks; table versions 6 and 8; tables written by Hudi and by us), and runs the compaction. The judge
is hudi-rs's snapshot of the undamaged table. Every trial must end in one of:

- **refused**: a :class:`~hoodie.errors.HoodieError` naming the damaged file, nothing committed;
- **unchanged**: committed, and the snapshot equals the judge's (the flip hit bytes no reader counts: a block
  of a rolled-back write, a footer, Parquet statistics);
- **value damage**: committed, the snapshot differs, and the flip lies inside a record's value bytes (an
  Avro record, a delete record, Parquet content): the format holds no checksum over them, so no reader can
  see the damage; compaction then writes exactly what a reader of the damaged table sees (our lenient read
  of the damaged copy before compaction, and hudi-rs's on a sample of trials).

A committed trial that differs from the judge with the flip anywhere else (framing, headers, lengths, record
counts) is a failure: that is the silent loss this test exists for.

``HOODIED_FUZZ_FLIPS`` (default 120) trials, seeded by ``HOODIED_FUZZ_SEED`` (default 2026); a failure
message names its seed and trial, which reproduce it alone (``HOODIED_FUZZ_ONLY=<trial>``).
"""

from __future__ import annotations

import math
import os
import random
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import HoodieError
from hoodie.lock import FileSystemLock
from hoodie.log.block import BlockType, LogBlock, iter_blocks
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodie.timeline.metadata import decode_compaction_plan
from support.compare import normalized_values
from support.hudi_oracle import HudiOracle, OracleRows, Query

pytestmark = [pytest.mark.slow]

FLIPS = int(os.environ.get("HOODIED_FUZZ_FLIPS", "120"))
SEED = int(os.environ.get("HOODIED_FUZZ_SEED", "2026"))
ONLY = os.environ.get("HOODIED_FUZZ_ONLY")
#: One trial in this many with value damage is also judged by hudi-rs reading the damaged copy.
HUDI_RS_SAMPLE = 10

#: Fixture tables written by Hudi with committed log files of every block kind.
FIXTURES = (
    "hudi-rs/quickstart_trips_table_mor_avro_v6_trips_8i3d:v6_trips_8i3d",  # Avro data + delete blocks
    "hudi-rs/sample_table_mor_parquet_v6_nonpartitioned_rollback:v6_nonpartitioned_rollback",  # + command
    "hudi-rs/quickstart_trips_table_mor_avro_v8_trips_8i3u1d:v8_trips_8i3u1d",  # v8, metadata table
    "apache-hudi/hudi-v6-table-mor:hudi-v6-table-mor",  # v6 appends, deletes
)
IGNORED = ("_hoodie_file_name",)


@dataclass
class Template:
    """A table with its compaction planned, the files the plan compacts and the judge's rows."""

    name: str
    root: Path
    instant: str
    log_files: list[str]
    expected: Counter[tuple[Any, ...]]
    columns: list[str]
    blocks: dict[str, list[LogBlock]] = field(default_factory=dict)


@dataclass
class Outcomes:
    refused: int = 0
    unchanged: int = 0
    value_damage: int = 0
    judged_by_hudi_rs: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def _rows(table: pa.Table, columns: list[str]) -> Counter[tuple[Any, ...]]:
    present = [c for c in columns if c in table.column_names]
    values = [normalized_values(table.column(c)) for c in present]
    return Counter(tuple(_same_nan(v[i]) for v in values) for i in range(table.num_rows))


def _same_nan(value: Any) -> Any:
    """NaN as one value (a flipped exponent makes one; NaN != NaN would split equal rows)."""
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def _judge(oracle: HudiOracle, root: Path) -> pa.Table:
    (result,) = oracle.run(root, [Query.snapshot()])
    assert isinstance(result, OracleRows), f"hudi-rs cannot read {root}: {result}"
    return result.table


def _template(name: str, root: Path, oracle: HudiOracle) -> Template | None:
    judged = _judge(oracle, root)
    storage = Storage.for_uri(str(root))
    scheduled = schedule_compaction(storage, FileSystemLock(storage))
    if scheduled.instant is None:
        return None
    table = Table.open(str(root))
    plan = decode_compaction_plan(
        storage.read(table.timeline.file_of(scheduled.instant.time, State.REQUESTED))
    )
    logs = sorted(
        f"{op.partition_path}/{n}" if op.partition_path else n
        for op in plan.operations
        for n in op.delta_file_paths
    )
    columns = [c for c in judged.column_names if c not in IGNORED]
    template = Template(name, root, scheduled.instant.time, logs, _rows(judged, columns), columns)
    for log in logs:
        template.blocks[log] = list(iter_blocks((root / log).read_bytes()))
    return template


def _region(blocks: list[LogBlock], data: bytes, offset: int) -> tuple[str, bool]:
    """What the flipped byte belongs to, and whether it is a record's value bytes (see the module doc)."""
    block = next((b for b in blocks if b.offset <= offset < b.end), None)
    if block is None or block.block_type is BlockType.CORRUPT:
        return "between blocks", False
    content_end = block.end - 8 - 4 - sum(8 + len(v.encode()) for v in block.footer.values())
    content_start = content_end - len(block.content)
    kind = block.block_type.name
    if not content_start <= offset < content_end:
        return f"{kind} framing/header", False
    at = offset - content_start
    if block.block_type is BlockType.PARQUET_DATA:
        return f"{kind} content", True
    if at < 8:
        return f"{kind} version/count", False
    if block.block_type is BlockType.DELETE:
        return f"{kind} records", True
    # An Avro data block: int32 length before each record.
    pos = 8
    content = block.content
    while pos + 4 <= len(content):
        length = int.from_bytes(content[pos : pos + 4], "big", signed=True)
        if at < pos + 4:
            return f"{kind} record length", False
        if at < pos + 4 + length:
            return f"{kind} record", True
        pos += 4 + length
    return f"{kind} content", False


def _trial(
    template: Template, rng: random.Random, work: Path, oracle: HudiOracle, outcomes: Outcomes, label: str
) -> None:
    log = rng.choice(template.log_files)
    data = (template.root / log).read_bytes()
    offset = rng.randrange(len(data))
    mask = rng.choice([1 << rng.randrange(8), 0xFF])
    region, in_value = _region(template.blocks[log], data, offset)
    where = f"{label}: {template.name} {log} offset {offset} mask {mask:#04x} ({region})"
    for old in work.iterdir():
        shutil.rmtree(old)
    root = work / label.replace(" ", "_")  # a path of its own: hudi-rs's answers are cached per path
    shutil.copytree(template.root, root, copy_function=os.link)
    target = root / log
    target.unlink()  # a fresh file: the template's hard link stays undamaged
    damaged = bytearray(data)
    damaged[offset] ^= mask
    target.write_bytes(bytes(damaged))
    try:  # what a (lenient) reader of the damaged table returns; content that does not decode raises
        seen_before: pa.Table | None = Table.open(str(root)).read()
    except HoodieError:
        seen_before = None
    storage = Storage.for_uri(str(root))
    try:
        compact_in_process(storage, FileSystemLock(storage), template.instant)
    except HoodieError as e:
        outcomes.refused += 1
        outcomes.by_kind[f"refused: {region}"] += 1
        if log not in str(e) and log.rsplit("/", 1)[-1] not in str(e):
            outcomes.failures.append(f"{where}: refused without naming the file: {e}")
        return
    after = _rows(Table.open(str(root)).read(), template.columns)
    if after == template.expected:
        outcomes.unchanged += 1
        outcomes.by_kind[f"unchanged: {region}"] += 1
        return
    if not in_value:
        lost = sum((template.expected - after).values())
        outcomes.failures.append(f"{where}: committed {lost} row(s) other than the judge's")
        return
    outcomes.value_damage += 1
    outcomes.by_kind[f"value damage: {region}"] += 1
    if seen_before is None or _rows(seen_before, template.columns) != after:
        outcomes.failures.append(f"{where}: compaction wrote other rows than a reader of the damaged copy")
    if outcomes.value_damage % HUDI_RS_SAMPLE == 1:
        outcomes.judged_by_hudi_rs += 1
        theirs = _rows(_judge(oracle, root), template.columns)
        if theirs != after:
            outcomes.failures.append(
                f"{where}: hudi-rs reads the compacted table differently: only hudi-rs "
                f"{list((theirs - after).elements())[:2]}, only ours {list((after - theirs).elements())[:2]}"
            )


def _generated(root: Path, version: int, log_format: str) -> Path:
    generate_table(
        str(root),
        GenerateSpec(
            table_version=version,
            rows=120,
            commits=3,
            partitions=1,
            seed=version,
            log_format=log_format,  # type: ignore[arg-type]
            update_fraction=0.3,
            delete_fraction=0.1,
        ),
    )
    return root


def test_no_damage_to_committed_logs_is_committed_unseen(
    tmp_path_factory: pytest.TempPathFactory, hudi_oracle: HudiOracle, request: pytest.FixtureRequest
) -> None:
    base = tmp_path_factory.mktemp("fuzz")
    makers: list[tuple[str, Callable[[Path], Path]]] = [
        ("generated v6 avro", lambda p: _generated(p, 6, "avro")),
        ("generated v8 parquet", lambda p: _generated(p, 8, "parquet")),
    ]
    missing = None
    try:
        fixture_root = request.getfixturevalue("fixture_root")
    except pytest.skip.Exception as e:  # no fixtures here: the generated tables still run
        missing = str(e)
    else:
        for table_id in FIXTURES:
            makers.append((table_id, lambda p, i=table_id: Path(shutil.copytree(fixture_root(i), p))))
    templates = []
    for i, (name, make) in enumerate(makers):
        template = _template(name, make(base / f"template{i}"), hudi_oracle)
        assert template is not None, f"{name}: nothing to compact"
        templates.append(template)
    rng = random.Random(SEED)
    outcomes = Outcomes()
    trials = [int(ONLY)] if ONLY else range(FLIPS)
    work = base / "work"
    work.mkdir()
    for n in range(max(trials) + 1):
        template = templates[n % len(templates)]
        trial_rng = random.Random(rng.random())
        if n in trials:
            _trial(template, trial_rng, work, hudi_oracle, outcomes, f"seed {SEED} trial {n}")
    summary = (
        f"{len(trials)} trials over {len(templates)} tables: {outcomes.refused} refused, "
        f"{outcomes.unchanged} unchanged, {outcomes.value_damage} value damage "
        f"({outcomes.judged_by_hudi_rs} judged by hudi-rs too); "
        + "; ".join(f"{k}: {v}" for k, v in sorted(outcomes.by_kind.items()))
    )
    print(summary)
    if missing:
        print(f"(fixture tables left out: {missing})")
    assert not outcomes.failures, "\n".join(outcomes.failures[:20]) + "\n" + summary
