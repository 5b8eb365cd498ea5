"""Merging a file slice one base-file row group at a time (``Table.stream_file_slice``, what compaction
writes from) gives exactly the records, in exactly the order, of merging it whole (``merge_file_slice``),
whatever the merge mode, with updates, deletes and inserts spread over many row groups."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.testing.table_writer import WriteConfig
from hoodie.write.base_file import ParquetOptions


@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("log_format", ["avro", "parquet"])
def test_streamed_merge_equals_the_whole_merge(tmp_path: Path, version: int, log_format: str) -> None:
    root = tmp_path / "t"
    config = WriteConfig(parquet=ParquetOptions(row_group_bytes=16 * 1024), log_format=log_format)  # type: ignore[arg-type]
    spec = GenerateSpec(
        table_version=version,
        rows=1500,
        commits=4,
        update_fraction=0.3,
        delete_fraction=0.1,
        partitions=2,
        log_format=log_format,  # type: ignore[arg-type]
        seed=17,
    )
    generate_table(str(root), spec, config)
    table = Table.open(str(root))
    slices = [s for s in table.file_slices() if s.log_files and s.base_file_path]
    assert slices, "the generated table has slices with a base file and log files"
    groups_seen = 0
    for s in slices:
        assert s.base_file_path is not None
        groups_seen = max(groups_seen, pq.read_metadata(str(root / s.base_file_path)).num_row_groups)
        whole = table.merge_file_slice(s, strict=True)
        stream = table.stream_file_slice(s, strict=True)
        chunks = list(stream.chunks)
        streamed = pa.concat_tables(chunks) if chunks else None
        assert whole.table is not None
        assert streamed is not None
        assert streamed.equals(whole.table), f"{s.group}: the streamed merge differs"
        assert stream.base_records == whole.base_records
        assert stream.log_records == whole.log_records
        assert sorted(stream.log_keys.to_pylist()) == sorted(whole.log_keys.to_pylist())
        in_log = set(whole.log_keys.to_pylist())
        base = whole.ledger.base_keys.to_pylist()
        assert stream.ledger.base_keys.to_pylist() == base
        assert stream.base_updated == sum(1 for k in base if k in in_log)
        merged_keys = set(whole.table.column("_hoodie_record_key").to_pylist())
        assert stream.base_kept == sum(1 for k in set(base) if k in merged_keys)
    assert groups_seen > 1, "base files of several row groups"
