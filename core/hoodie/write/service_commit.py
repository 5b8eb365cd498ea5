"""What the commits of the rewriting table services (compaction, clustering) share: the schema they record,
the check that their instant is still theirs to complete, and the check of a written file's row count.

A service's attempt completes its instant only while the instant is inflight: when it is not (another runner
completed it, or rolled it back), the attempt deletes the files it wrote that the winning commit does not
name and gives up with :class:`~hoodie.errors.CommitConflict`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import CommitConflict, CorruptBaseFile, HoodieError
from hoodie.storage import Storage
from hoodie.table import META_COLUMNS, Table
from hoodie.timeline.instant import State
from hoodie.timeline.metadata import WriteStat
from hoodie.write.markers import Markers


def without_meta_fields(avro_json: str) -> str:
    """The Avro schema (JSON) without Hudi's meta fields, as a service's commit metadata records it."""
    schema = json.loads(avro_json)
    if isinstance(schema, Mapping) and "fields" in schema:
        fields = [f for f in schema["fields"] if f.get("name") not in META_COLUMNS]
        if len(fields) != len(schema["fields"]):
            return json.dumps({**schema, "fields": fields}, separators=(",", ":"))
    return avro_json


def check_still_inflight(
    storage: Storage, table: Table, service: str, instant_time: str, action: str, stats: Sequence[WriteStat]
) -> None:
    """Raise :class:`CommitConflict` (after deleting this attempt's own files) unless the ``action`` instant
    at ``instant_time`` is inflight on ``table``'s timeline."""
    current = table.timeline.get(instant_time)
    if current is None or current.state is not State.INFLIGHT or current.action != action:
        discard_own_files(storage, table, instant_time, stats)
        raise CommitConflict(
            f"{service} {instant_time} is no longer inflight ({current or 'gone'}); another runner finished "
            "or rolled it back, so this attempt does not commit (its own files were deleted)"
        )


def discard_own_files(storage: Storage, table: Table, instant_time: str, stats: Sequence[WriteStat]) -> None:
    """Delete the files this attempt wrote that the instant's winning commit does not name."""
    kept: set[str] = set()
    completed = table.timeline.is_completed(instant_time)
    if completed:
        kept = set(table.commit_metadata(instant_time).written_file_paths)
    for stat in stats:
        if stat.path and stat.path not in kept:
            storage.delete(stat.path)
    if completed:
        Markers(storage, instant_time).delete_all()  # markers of a completed instant name nothing left


def written_rows(storage: Storage, path: str) -> int:
    """The row count in the Parquet footer of ``path``; :class:`CorruptBaseFile` when unreadable."""
    try:
        with storage.open_input_file(path) as f:
            return int(pq.read_metadata(f).num_rows)
    except (OSError, HoodieError, pa.ArrowException) as e:
        raise CorruptBaseFile(f"{path} is unreadable: {e}") from e


__all__ = ["check_still_inflight", "discard_own_files", "without_meta_fields", "written_rows"]
