"""The ``hoodie.properties`` of a new table: the keys Hudi's writers put there when they create one, per
table version (checked against the fixture tables Hudi 0.15, 1.0 and 1.1 created).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from hoodie.config import (
    ARCHIVELOG_FOLDER,
    ARCHIVELOG_FOLDER_DEFAULT,
    CHECKSUM,
    COMMIT_TIME_MERGE_STRATEGY_ID,
    CREATE_SCHEMA,
    DATABASE_NAME,
    DEFAULT_PAYLOAD_CLASS,
    DROP_PARTITION_COLUMNS,
    EVENT_TIME_MERGE_STRATEGY_ID,
    EVENT_TIME_PAYLOAD_CLASS,
    HIVE_STYLE_PARTITIONING,
    HIVE_STYLE_PARTITIONING_DEFAULT,
    INITIAL_VERSION,
    KEY_GENERATOR_CLASSES,
    KEYGENERATOR_CLASS,
    KEYGENERATOR_TYPE,
    LEGACY_RECORD_MERGER_STRATEGY,
    NAME,
    ORDERING_FIELDS,
    OVERWRITE_PAYLOAD_CLASS,
    PARTITION_FIELDS,
    PAYLOAD_CLASS,
    PAYLOAD_MERGE_STRATEGY_ID,
    POPULATE_META_FIELDS,
    PRECOMBINE_FIELD,
    RECORD_MERGE_MODE,
    RECORD_MERGE_STRATEGY_ID,
    RECORDKEY_FIELDS,
    SUPPORTED_VERSIONS,
    TABLE_FORMAT,
    TABLE_FORMAT_DEFAULT,
    TABLE_TYPE,
    TABLE_VERSION,
    TIMELINE_HISTORY_PATH,
    TIMELINE_HISTORY_PATH_DEFAULT,
    TIMELINE_LAYOUT_VERSION,
    TIMELINE_PATH,
    TIMELINE_PATH_DEFAULT,
    TIMELINE_TIMEZONE,
    URL_ENCODE_PARTITIONING,
    RecordMergeMode,
    TableConfig,
    TableType,
    table_checksum,
)
from hoodie.errors import UnsupportedTable


def _infer_key_generator(record_key_fields: Sequence[str], partition_fields: Sequence[str]) -> str:
    if not partition_fields:
        return "NON_PARTITION"
    if len(record_key_fields) > 1 or len(partition_fields) > 1:
        return "COMPLEX"
    return "SIMPLE"


def _merge_mode_of_payload(payload_class: str) -> RecordMergeMode:
    if payload_class in (DEFAULT_PAYLOAD_CLASS, EVENT_TIME_PAYLOAD_CLASS):
        return RecordMergeMode.EVENT_TIME_ORDERING
    if payload_class == OVERWRITE_PAYLOAD_CLASS:
        return RecordMergeMode.COMMIT_TIME_ORDERING
    return RecordMergeMode.CUSTOM


def new_table_properties(
    name: str,
    table_type: TableType | str,
    table_version: int,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str] = (),
    ordering_fields: Sequence[str] = (),
    *,
    key_generator: str | None = None,
    populate_meta_fields: bool = True,
    hive_style: bool = HIVE_STYLE_PARTITIONING_DEFAULT,
    merge_mode: RecordMergeMode | str | None = None,
    payload_class: str | None = None,
    timeline_timezone: str | None = "UTC",
    create_schema: str | None = None,
    database_name: str = "",
    url_encode_partitioning: bool = False,
    drop_partition_columns: bool = False,
) -> dict[str, str]:
    """The ``hoodie.properties`` keys of a new table, as Hudi's Spark SQL ``CREATE TABLE`` writes them.

    Checked against the fixture tables created by Hudi 0.15 (v6), 1.0 (v8) and 1.1 (v9):

    - every version: name, type, version, layout version, ``archivelog.folder=archived``, record key fields,
      partition fields (when partitioned), ``drop.partition.columns``, ``hive_style_partitioning``,
      ``partitionpath.urlencode``, database name (when given), create schema (when given), checksum;
    - v6: ``keygenerator.class``, ``precombine.field``, ``compaction.payload.class`` (the payload, default
      ``OverwriteWithLatestAvroPayload``) and ``compaction.record.merger.strategy``;
    - v8: ``initial.version``, ``keygenerator.type``, ``precombine.field``, ``record.merge.mode``, the payload
      class and ``record.merge.strategy.id`` that go with the mode, ``timeline.path`` and
      ``timeline.history.path``;
    - v9: as v8 but ``ordering.fields`` and ``table.format=native``, and no payload class or strategy id
      (Hudi 1.1 writes the merge mode alone for event- and commit-time ordering).

    Beyond Hudi's defaults: ``hoodie.table.timeline.timezone`` is written when ``timeline_timezone`` is given
    (default UTC: Hudi's writers then use the zone our instant times use), and
    ``hoodie.populate.meta.fields=false`` when meta fields are off. The merge mode defaults as in Hudi 1.x:
    from the payload class when one is given, else (v8+) event-time ordering with an ordering field and
    commit-time ordering without; v6 defaults to 0.x's ``OverwriteWithLatestAvroPayload``.
    ``key_generator`` is a type name (``SIMPLE``, ``COMPLEX``, ``NON_PARTITION``, ``TIMESTAMP``, ``CUSTOM``)
    or, for v6, a class name; by default it is inferred from the fields.
    Bad combinations raise ValueError; table versions other than 6, 8, 9 UnsupportedTable.
    """
    if table_version not in SUPPORTED_VERSIONS:
        raise UnsupportedTable(f"table version {table_version} is not supported (supported: 6, 8, 9)")
    if not name.strip():
        raise ValueError("a table needs a name")
    ttype = table_type if isinstance(table_type, TableType) else TableType(str(table_type).strip().upper())
    keys = [f.strip() for f in record_key_fields if f.strip()]
    parts = [f.strip() for f in partition_fields if f.strip()]
    ordering = [f.strip() for f in ordering_fields if f.strip()]
    if not keys:
        raise ValueError("a table needs at least one record key field")
    if table_version < 9 and len(ordering) > 1:
        raise ValueError(f"table version {table_version} takes one precombine field, not {ordering}")

    # Merge mode, payload class and merge strategy id, as inferred by Hudi 1.x.
    mode = None
    if merge_mode is not None:
        mode = RecordMergeMode(
            merge_mode.value if isinstance(merge_mode, RecordMergeMode) else merge_mode.upper()
        )
    if payload_class:
        payload_mode = _merge_mode_of_payload(payload_class)
        if mode is not None and mode is not payload_mode:
            raise ValueError(f"merge mode {mode.value} contradicts payload class {payload_class}")
        mode = payload_mode
    elif mode is None:
        # Hudi 1.x infers from the ordering field; 0.x always defaulted to OverwriteWithLatestAvroPayload.
        event_time = bool(ordering) and table_version >= 8
        mode = RecordMergeMode.EVENT_TIME_ORDERING if event_time else RecordMergeMode.COMMIT_TIME_ORDERING
    if mode is RecordMergeMode.CUSTOM and not payload_class:
        raise ValueError("merge mode CUSTOM needs a payload class")
    if mode is RecordMergeMode.CUSTOM and table_version >= 9:
        raise UnsupportedTable(
            "creating v9 tables with a custom payload (merge mode CUSTOM) is not supported"
        )
    payload = payload_class or (
        DEFAULT_PAYLOAD_CLASS if mode is RecordMergeMode.EVENT_TIME_ORDERING else OVERWRITE_PAYLOAD_CLASS
    )

    keygen = (key_generator or _infer_key_generator(keys, parts)).strip()
    if "." in keygen:
        by_class = {c: t for t, c in KEY_GENERATOR_CLASSES.items()}
        if table_version >= 8 and keygen not in by_class:
            raise ValueError(f"key generator class {keygen} has no key generator type for v{table_version}")
        keygen_class, keygen_type = keygen, by_class.get(keygen, "")
    else:
        keygen_type = keygen.upper()
        if keygen_type not in KEY_GENERATOR_CLASSES:
            raise ValueError(
                f"unknown key generator type {keygen!r} (one of {sorted(KEY_GENERATOR_CLASSES)})"
            )
        keygen_class = KEY_GENERATOR_CLASSES[keygen_type]

    props: dict[str, str] = {}
    if table_version == 6:
        props[PAYLOAD_CLASS] = payload
    else:
        props[INITIAL_VERSION] = str(table_version)
        props[KEYGENERATOR_TYPE] = keygen_type
    props[TABLE_TYPE] = ttype.value
    if ordering and table_version < 9:
        props[PRECOMBINE_FIELD] = ordering[0]
    if parts:
        props[PARTITION_FIELDS] = ",".join(parts)
    props[ARCHIVELOG_FOLDER] = ARCHIVELOG_FOLDER_DEFAULT
    if create_schema:
        props[CREATE_SCHEMA] = create_schema
    props[TIMELINE_LAYOUT_VERSION] = "1" if table_version == 6 else "2"
    if table_version >= 8:
        props[TIMELINE_HISTORY_PATH] = TIMELINE_HISTORY_PATH_DEFAULT
    props[DROP_PARTITION_COLUMNS] = _bool_text(drop_partition_columns)
    if table_version >= 9:
        props[TABLE_FORMAT] = TABLE_FORMAT_DEFAULT
    if table_version == 8:
        props[PAYLOAD_CLASS] = payload
        props[RECORD_MERGE_STRATEGY_ID] = {
            RecordMergeMode.EVENT_TIME_ORDERING: EVENT_TIME_MERGE_STRATEGY_ID,
            RecordMergeMode.COMMIT_TIME_ORDERING: COMMIT_TIME_MERGE_STRATEGY_ID,
            RecordMergeMode.CUSTOM: PAYLOAD_MERGE_STRATEGY_ID,
        }[mode]
    props[NAME] = name.strip()
    props[RECORDKEY_FIELDS] = ",".join(keys)
    if table_version >= 8:
        props[TIMELINE_PATH] = TIMELINE_PATH_DEFAULT
    if ordering and table_version >= 9:
        props[ORDERING_FIELDS] = ",".join(ordering)
    if table_version == 6:
        props[LEGACY_RECORD_MERGER_STRATEGY] = EVENT_TIME_MERGE_STRATEGY_ID
    props[HIVE_STYLE_PARTITIONING] = _bool_text(hive_style)
    if table_version == 6:
        props[KEYGENERATOR_CLASS] = keygen_class
    if not populate_meta_fields:
        props[POPULATE_META_FIELDS] = "false"
    if database_name.strip():
        props[DATABASE_NAME] = database_name.strip()
    props[URL_ENCODE_PARTITIONING] = _bool_text(url_encode_partitioning)
    if table_version >= 8:
        props[RECORD_MERGE_MODE] = mode.value
    if timeline_timezone is not None:
        zone = timeline_timezone.strip().upper()
        if zone not in ("UTC", "LOCAL"):
            raise ValueError(f"timeline time zone {timeline_timezone!r} is not UTC or LOCAL")
        props[TIMELINE_TIMEZONE] = zone
    props[TABLE_VERSION] = str(table_version)
    props[CHECKSUM] = str(table_checksum(database_name.strip(), name.strip()))
    return props


def create_table_properties(props: Mapping[str, str], *, now: dt.datetime | None = None) -> str:
    """The text of a new table's ``hoodie.properties`` (``#Properties saved on ...``) holding ``props`` (from
    :func:`new_table_properties`), checked by :class:`TableConfig`. Write it with :meth:`TableConfig.create`
    semantics (refuse an existing table)."""
    return TableConfig(props).to_text(now=now, header="Properties saved on")


def _bool_text(value: bool) -> str:
    return "true" if value else "false"
