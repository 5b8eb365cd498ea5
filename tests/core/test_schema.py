from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from hoodie.errors import UnsupportedTable
from hoodie.schema import avro_records_to_arrow, avro_to_arrow_schema, compile_avro_schema

UTC = dt.UTC


def record(*fields: dict[str, Any], name: str = "r", namespace: str | None = "hoodie.t") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "record", "name": name, "fields": list(fields)}
    if namespace is not None:
        schema["namespace"] = namespace
    return schema


def one_field_type(avro_type: Any) -> pa.Field:
    return avro_to_arrow_schema(record({"name": "f", "type": avro_type})).field("f")


def roundtrip(schema: dict[str, Any], records: list[dict[str, Any]]) -> pa.Table:
    """Write records with fastavro (logical types on), decode them as the log reader does, convert."""
    compiled = compile_avro_schema(schema)
    decoded = []
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), r)
        buf.seek(0)
        decoded.append(fastavro.schemaless_reader(buf, compiled.decode_schema))
    return avro_records_to_arrow(decoded, schema)


@pytest.mark.parametrize(
    ("avro_type", "arrow_type"),
    [
        ("boolean", pa.bool_()),
        ("int", pa.int32()),
        ("long", pa.int64()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("bytes", pa.binary()),
        ("string", pa.string()),
        ("null", pa.null()),
        ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, pa.string()),
        ({"type": "fixed", "name": "F", "size": 7}, pa.binary(7)),
        ({"type": "array", "items": "long"}, pa.list_(pa.field("element", pa.int64(), nullable=False))),
        ({"type": "array", "items": ["null", "long"]}, pa.list_(pa.field("element", pa.int64()))),
        (
            {"type": "map", "values": "int"},
            pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False)),
        ),
        ({"type": "map", "values": ["null", "int"]}, pa.map_(pa.string(), pa.int32())),
        ({"type": "int", "logicalType": "date"}, pa.date32()),
        ({"type": "int", "logicalType": "time-millis"}, pa.time32("ms")),
        ({"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
        ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC")),
        ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")),
        ({"type": "long", "logicalType": "timestamp-nanos"}, pa.timestamp("ns", tz="UTC")),
        ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("ms")),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
        ({"type": "string", "logicalType": "uuid"}, pa.string()),
        ({"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"}, pa.binary(16)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}, pa.decimal128(30, 15)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 9}, pa.decimal128(9, 0)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 2}, pa.decimal256(50, 2)),
        (
            {"type": "fixed", "name": "D", "size": 5, "logicalType": "decimal", "precision": 10, "scale": 2},
            pa.decimal128(10, 2),
        ),
        # Logical types on the wrong physical type, invalid or unknown ones are ignored (Avro spec).
        ({"type": "string", "logicalType": "date"}, pa.string()),
        ({"type": "int", "logicalType": "timestamp-millis"}, pa.int32()),
        ({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 7}, pa.binary()),
        ({"type": "fixed", "name": "S", "size": 2, "logicalType": "decimal", "precision": 10}, pa.binary(2)),
        ({"type": "string", "logicalType": "varchar", "maxLength": 3}, pa.string()),
        ({"type": {"type": "long", "logicalType": "timestamp-micros"}}, pa.timestamp("us", tz="UTC")),
    ],
)
def test_types(avro_type: Any, arrow_type: pa.DataType) -> None:
    f = one_field_type(avro_type)
    assert f.type == arrow_type
    assert not f.nullable or arrow_type == pa.null()


@pytest.mark.parametrize(
    ("avro_type", "arrow_type", "nullable"),
    [
        (["null", "string"], pa.string(), True),
        (["string", "null"], pa.string(), True),
        (["string"], pa.string(), False),
        (["null"], pa.null(), True),
        (["null", {"type": "long", "logicalType": "timestamp-micros"}], pa.timestamp("us", tz="UTC"), True),
        (["null", "int", "long"], pa.int64(), True),
        (["int", "float"], pa.float32(), False),
        (["long", "float"], pa.float64(), False),
        (["null", "int", "double"], pa.float64(), True),
        (["string", {"type": "enum", "name": "E", "symbols": ["X"]}], pa.string(), False),
    ],
)
def test_unions(avro_type: Any, arrow_type: pa.DataType, nullable: bool) -> None:
    f = one_field_type(avro_type)
    assert f.type == arrow_type
    assert f.nullable is nullable


@pytest.mark.parametrize(
    "avro_type",
    [
        ["null", "string", "long"],
        ["bytes", "string"],
        [
            "null",
            {"type": "record", "name": "A", "fields": []},
            {"type": "record", "name": "B", "fields": []},
        ],
        ["int", {"type": "int", "logicalType": "date"}],
    ],
)
def test_unions_without_an_arrow_equivalent_are_refused_naming_the_field(avro_type: Any) -> None:
    schema = record({"name": "outer", "type": record({"name": "inner", "type": avro_type}, name="n")})
    with pytest.raises(UnsupportedTable, match=r"outer\.inner"):
        avro_to_arrow_schema(schema)


def test_nested_records_arrays_and_maps_keep_their_nullability() -> None:
    schema = record(
        {"name": "id", "type": "long"},
        {
            "name": "s",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "s",
                    "fields": [
                        {"name": "a", "type": ["null", "int"], "default": None},
                        {"name": "tags", "type": {"type": "array", "items": "string"}},
                        {"name": "m", "type": ["null", {"type": "map", "values": ["null", "double"]}]},
                    ],
                },
            ],
        },
    )
    arrow = avro_to_arrow_schema(schema)
    assert arrow == pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field(
                "s",
                pa.struct(
                    [
                        pa.field("a", pa.int32()),
                        pa.field(
                            "tags", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False
                        ),
                        pa.field("m", pa.map_(pa.string(), pa.float64())),
                    ]
                ),
            ),
        ]
    )


def test_named_types_resolve_by_namespace_like_hudis_decimal_fixeds() -> None:
    """Spark names every decimal ``fixed`` "fixed", each in the namespace of its field; references resolve."""
    schema = record(
        {
            "name": "small",
            "type": {
                "type": "fixed",
                "name": "fixed",
                "namespace": "r.small",
                "size": 3,
                "logicalType": "decimal",
                "precision": 5,
                "scale": 2,
            },
        },
        {
            "name": "large",
            "type": {
                "type": "fixed",
                "name": "fixed",
                "namespace": "r.large",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 9,
            },
        },
        {"name": "small_again", "type": ["null", "r.small.fixed"]},
        {"name": "inner", "type": record({"name": "x", "type": "int"}, name="Inner", namespace=None)},
        {"name": "inner_again", "type": "Inner"},  # short name, resolved in the enclosing namespace
        namespace=None,
    )
    arrow = avro_to_arrow_schema(schema)
    assert arrow.field("small").type == pa.decimal128(5, 2)
    assert arrow.field("large").type == pa.decimal128(18, 9)
    assert arrow.field("small_again").type == pa.decimal128(5, 2)
    assert arrow.field("small_again").nullable
    assert arrow.field("inner_again").type == pa.struct([pa.field("x", pa.int32(), nullable=False)])


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("{not json", "not valid JSON"),
        ('"long"', "not a record"),
        (json.dumps(record({"name": "self", "type": ["null", "hoodie.t.r"]})), "refers to itself"),
        (json.dumps(record({"name": "x", "type": "Nowhere"})), "unknown Avro type"),
        (json.dumps(record({"name": "x", "type": 5})), "not an Avro schema"),
        (json.dumps({"type": "record", "name": "r"}), "has no fields"),
    ],
)
def test_unusable_schemas_raise_a_clear_error(schema: str, message: str) -> None:
    with pytest.raises(UnsupportedTable, match=message):
        avro_to_arrow_schema(schema)


def test_json_text_and_parsed_json_give_the_same_schema() -> None:
    schema = record({"name": "a", "type": ["null", "string"]})
    assert avro_to_arrow_schema(json.dumps(schema)) == avro_to_arrow_schema(schema)


def test_decode_schema_strips_only_the_logical_types_we_cast() -> None:
    schema = record(
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}},
    )
    text = json.dumps(compile_avro_schema(schema).decode_schema)
    for stripped in ("timestamp-millis", '"date"', "uuid"):
        assert stripped not in text
    assert "decimal" in text


LOGICAL_SCHEMA = record(
    {"name": "key", "type": "string"},
    {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
    {
        "name": "price",
        "type": {
            "type": "fixed",
            "name": "price_t",
            "size": 5,
            "logicalType": "decimal",
            "precision": 10,
            "scale": 2,
        },
    },
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "raw", "type": {"type": "fixed", "name": "raw_t", "size": 2}},
    {
        "name": "nested",
        "type": {
            "type": "array",
            "items": {
                "type": "record",
                "name": "Event",
                "fields": [
                    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
                    {
                        "name": "props",
                        "type": {"type": "map", "values": {"type": "int", "logicalType": "date"}},
                    },
                ],
            },
        },
    },
)


def logical_records() -> list[dict[str, Any]]:
    return [
        {
            "key": "k1",
            "ts_ms": dt.datetime(2024, 4, 2, 12, 30, 35, 233000, tzinfo=UTC),
            "ts_us": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            "local_ms": dt.datetime(2024, 4, 2, 12, 30, 35, 233000),
            "local_us": dt.datetime(2024, 4, 2, 12, 30, 35, 233001),
            "day": dt.date(1900, 1, 1),
            "t_ms": dt.time(23, 59, 59, 999000),
            "t_us": dt.time(0, 0, 0, 1),
            "id": uuid.UUID("334e26e9-8355-45cc-97c6-c31daf0df330"),
            "amount": Decimal("-123456789.123"),
            "price": Decimal("99999999.99"),
            "color": "GREEN",
            "raw": b"\x00\xff",
            "nested": [
                {"at": dt.datetime(2020, 1, 1, tzinfo=UTC), "props": {"a": dt.date(2020, 2, 29)}},
                {"at": None, "props": {}},
            ],
        },
        {
            "key": "k2",
            "ts_ms": dt.datetime(1970, 1, 1, tzinfo=UTC),
            "ts_us": None,
            "local_ms": dt.datetime(1970, 1, 1),
            "local_us": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
            "day": dt.date(9999, 12, 31),
            "t_ms": dt.time(0, 0),
            "t_us": dt.time(12, 0, 0, 500000),
            "id": uuid.UUID(int=0),
            "amount": Decimal("0.000"),
            "price": Decimal("-0.01"),
            "color": "RED",
            "raw": b"ab",
            "nested": [],
        },
    ]


def test_records_with_logical_types_come_out_as_arrow_temporal_and_decimal_values() -> None:
    table = roundtrip(LOGICAL_SCHEMA, logical_records())
    assert table.schema == avro_to_arrow_schema(LOGICAL_SCHEMA)
    expected = logical_records()
    for row in expected:
        row["id"] = str(row["id"])
        row["nested"] = [{**e, "props": list(e["props"].items())} for e in row["nested"]]
    assert table.to_pylist() == expected


def test_records_decoded_with_their_logical_types_also_convert() -> None:
    """The slow path: records decoded with the original schema (datetime objects) convert too."""
    schema = record(
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]},
    )
    rows = [
        {"ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "d": dt.date(2024, 1, 2)},
        {"ts": 0, "d": None},
    ]
    table = avro_records_to_arrow(rows, schema)
    assert table.column("ts").to_pylist() == [rows[0]["ts"], dt.datetime(1970, 1, 1, tzinfo=UTC)]
    assert table.column("d").to_pylist() == [dt.date(2024, 1, 2), None]


def test_decoding_yields_ints_for_temporal_fields_not_python_datetimes() -> None:
    schema = record({"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}})
    buf = io.BytesIO()
    fastavro.schemaless_writer(
        buf, fastavro.parse_schema(schema), {"ts": dt.datetime(2024, 1, 1, tzinfo=UTC)}
    )
    buf.seek(0)
    decoded = fastavro.schemaless_reader(buf, compile_avro_schema(schema).decode_schema)
    assert decoded == {"ts": 1704067200000000}


def test_zero_records_give_an_empty_table_of_the_schema() -> None:
    table = avro_records_to_arrow([], LOGICAL_SCHEMA)
    assert table.num_rows == 0
    assert table.schema == avro_to_arrow_schema(LOGICAL_SCHEMA)


def test_hudi_table_create_schema_with_null_last_unions() -> None:
    """``hoodie.table.create.schema`` of a fixture table (Spark writes unions with null last)."""
    schema = {
        "type": "record",
        "name": "v6_record",
        "namespace": "hoodie.v6",
        "fields": [
            {"name": "id", "type": ["int", "null"]},
            {
                "name": "decimalField",
                "type": [
                    {
                        "type": "fixed",
                        "name": "fixed",
                        "namespace": "hoodie.v6.v6_record.decimalField",
                        "size": 5,
                        "logicalType": "decimal",
                        "precision": 10,
                        "scale": 5,
                    },
                    "null",
                ],
            },
            {"name": "dateField", "type": [{"type": "int", "logicalType": "date"}, "null"]},
            {
                "name": "arrayField",
                "type": [
                    {
                        "type": "array",
                        "items": [
                            {
                                "type": "record",
                                "name": "arrayField",
                                "namespace": "hoodie.v6.v6_record",
                                "fields": [{"name": "f1", "type": ["string", "null"]}],
                            },
                            "null",
                        ],
                    },
                    "null",
                ],
            },
        ],
    }
    arrow = avro_to_arrow_schema(schema)
    assert [f.nullable for f in arrow] == [True, True, True, True]
    assert arrow.field("decimalField").type == pa.decimal128(10, 5)
    assert arrow.field("dateField").type == pa.date32()
    assert arrow.field("arrayField").type == pa.list_(
        pa.field("element", pa.struct([pa.field("f1", pa.string())]))
    )


def test_arrow_to_avro_round_trips_through_avro_to_arrow() -> None:
    from hoodie.schema import arrow_to_avro_schema

    arrow = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            ("ts", pa.int64()),
            ("price", pa.decimal128(10, 2)),
            ("big", pa.decimal128(38, 9)),
            ("at", pa.timestamp("us", tz="UTC")),
            ("local", pa.timestamp("ms")),
            ("day", pa.date32()),
            ("flag", pa.bool_()),
            ("nested", pa.struct([("a", pa.int32()), ("b", pa.list_(pa.float64()))])),
            ("tags", pa.map_(pa.string(), pa.string())),
        ]
    )
    avro = arrow_to_avro_schema(arrow, record_name="trips_record", namespace="hoodie.trips")
    assert avro["name"] == "trips_record"
    assert avro["namespace"] == "hoodie.trips"
    assert avro["fields"][0] == {"name": "id", "type": "string"}
    assert avro["fields"][1] == {"name": "ts", "type": ["null", "long"], "default": None}
    price = avro["fields"][2]["type"][1]
    assert (price["type"], price["size"], price["precision"], price["scale"]) == ("fixed", 5, 10, 2)
    assert avro["fields"][3]["type"][1]["size"] == 16
    assert avro_to_arrow_schema(avro) == arrow


def test_arrow_to_avro_leaves_meta_columns_out_and_refuses_what_avro_cannot_hold() -> None:
    from hoodie.schema import arrow_to_avro_schema

    with_meta = pa.schema([("_hoodie_commit_time", pa.string()), ("_hoodie_is_deleted", pa.bool_())])
    names = [f["name"] for f in arrow_to_avro_schema(with_meta, record_name="r", namespace="n")["fields"]]
    assert names == ["_hoodie_is_deleted"]
    with pytest.raises(UnsupportedTable, match="field d: Arrow type duration"):
        arrow_to_avro_schema(pa.schema([("d", pa.duration("s"))]), record_name="r", namespace="n")
