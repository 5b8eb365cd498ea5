"""Realistic generated tables for tests, benchmarks and the demo (``hoodied generate``).

Rows are taxi trips: a UUID record key, an event time ``ts`` (the ordering field), rider and driver names,
fares as double and as decimal, a start timestamp, coordinates, a trip date and a ``city`` partition column.
The first commit inserts ``rows`` records; every later commit upserts: it updates ``update_fraction`` of the
live records (with a later ``ts``), deletes ``delete_fraction`` of them, and inserts as many new ones as make
the batch ``rows`` rows long. The data, the keys and the file ids depend only on the seed.

``operation`` chooses how the batches are written (Hudi's write operations):

- ``upsert`` (the default): each key once; an update replaces its record;
- ``insert``: nothing is looked up, so every "update" stores the key once more (in a small file or a new file
  group of its partition); the deletes of a batch are a ``delete`` commit of their own, after it;
- ``bulk_insert``: as ``insert``, into new file groups only, and each batch also repeats ``update_fraction``
  of its own new keys (a key twice in one base file, as a bulk insert of un-deduplicated input makes).

So ``insert`` and ``bulk_insert`` make tables that repeat record keys: across file groups and inside a base
file (a key keeps its partition, so repeats stay within one).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa

from hoodie.testing.table_writer import CommitResult, TableWriter, WriteConfig

CITIES = ("san_francisco", "sao_paulo", "chennai", "amsterdam", "new_york", "tokyo", "lagos", "berlin")

TRIPS_SCHEMA = pa.schema(
    [
        pa.field("uuid", pa.string(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("rider", pa.string()),
        pa.field("driver", pa.string()),
        pa.field("fare", pa.float64()),
        pa.field("fare_amount", pa.decimal128(10, 2)),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("begin_lat", pa.float64()),
        pa.field("begin_lon", pa.float64()),
        pa.field("trip_date", pa.date32()),
        pa.field("city", pa.string(), nullable=False),
    ]
)

_EPOCH_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z


@dataclass(frozen=True)
class GenerateSpec:
    table_type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"] = "MERGE_ON_READ"
    table_version: int = 8
    rows: int = 1000
    commits: int = 3
    update_fraction: float = 0.2
    delete_fraction: float = 0.05
    partitions: int = 4
    log_format: Literal["avro", "parquet"] = "avro"
    seed: int = 0
    name: str = "trips"
    hive_style: bool = False
    operation: Literal["upsert", "insert", "bulk_insert"] = "upsert"

    def __post_init__(self) -> None:
        if self.rows < 1 or self.commits < 1:
            raise ValueError("rows and commits must be at least 1")
        if not 0 <= self.update_fraction <= 1 or not 0 <= self.delete_fraction <= 1:
            raise ValueError("update and delete fractions must be within [0, 1]")
        if self.update_fraction + self.delete_fraction > 1:
            raise ValueError("update_fraction + delete_fraction must not exceed 1")
        if self.partitions < 0:
            raise ValueError("partitions must be >= 0")
        if self.operation not in ("upsert", "insert", "bulk_insert"):
            raise ValueError(f"operation must be upsert, insert or bulk_insert, not {self.operation!r}")


class TripGenerator:
    """Deterministic trip rows for one seed."""

    def __init__(self, seed: int, partitions: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._keys = random.Random(seed)
        self._cities = [f"{CITIES[i % len(CITIES)]}_{i // len(CITIES)}" for i in range(max(partitions, 1))]
        self._clock = _EPOCH_MS

    def keys(self, n: int) -> list[str]:
        return [str(uuid.UUID(int=self._keys.getrandbits(128), version=4)) for _ in range(n)]

    def rows(self, keys: list[str], cities: list[str] | None = None) -> pa.Table:
        n = len(keys)
        rng = self._rng
        self._clock += 60_000
        ts = self._clock + rng.integers(0, 60_000, n)
        fare = np.round(rng.uniform(3, 120, n), 2)
        started = (ts - rng.integers(60_000, 3_600_000, n)) * 1000
        city = (
            cities if cities is not None else [self._cities[i] for i in rng.integers(0, len(self._cities), n)]
        )
        dates = (started // 86_400_000_000).astype(np.int32)
        return pa.table(
            {
                "uuid": pa.array(keys, pa.string()),
                "ts": pa.array(ts, pa.int64()),
                "rider": pa.array([f"rider-{i:03d}" for i in rng.integers(0, 500, n)]),
                "driver": pa.array([f"driver-{i:03d}" for i in rng.integers(0, 200, n)]),
                "fare": pa.array(fare),
                "fare_amount": _decimal_from_units(
                    np.round(fare * 100).astype(np.int64), pa.decimal128(10, 2)
                ),
                "started_at": pa.array(started, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                "begin_lat": pa.array(rng.uniform(-90, 90, n)),
                "begin_lon": pa.array(rng.uniform(-180, 180, n)),
                "trip_date": pa.array(dates, pa.int32()).cast(pa.date32()),
                "city": pa.array(city, pa.string()),
            }
        ).cast(TRIPS_SCHEMA, safe=False)

    def choose(self, population: int, k: int) -> np.ndarray:
        return self._rng.choice(population, size=min(k, population), replace=False)


def trips_writer(
    path: str,
    *,
    table_type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"],
    seed: int,
    name: str = "bench",
    table_version: int = 8,
    partitioned: bool = True,
    hive_style: bool = False,
    config: WriteConfig | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> TableWriter:
    """Create an empty table of :data:`TRIPS_SCHEMA` rows at ``path`` (record key ``uuid``, ordering field
    ``ts``, partitioned by ``city`` unless ``partitioned`` is false) and return its writer, its file ids drawn
    from ``seed``; ``storage_options`` as :meth:`~hoodie.storage.Storage.for_uri` takes them (an object
    store's endpoint and credentials)."""
    return TableWriter.create(
        path,
        name=name,
        table_type=table_type,
        table_version=table_version,
        schema=TRIPS_SCHEMA,
        record_key_fields=("uuid",),
        partition_fields=("city",) if partitioned else (),
        ordering_field="ts",
        hive_style=hive_style,
        config=config,
        rng=random.Random(seed),
        storage_options=storage_options,
    )


def generate_table(
    path: str,
    spec: GenerateSpec,
    config: WriteConfig | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> list[CommitResult]:
    """Create a table at ``path`` and write ``spec.commits`` commits to it; returns what each committed."""
    writer = trips_writer(
        path,
        name=spec.name,
        table_type=spec.table_type,
        table_version=spec.table_version,
        partitioned=spec.partitions > 0,
        hive_style=spec.hive_style,
        config=config or WriteConfig(log_format=spec.log_format),
        seed=spec.seed,
        storage_options=storage_options,
    )
    gen = TripGenerator(spec.seed, spec.partitions)
    live_keys = gen.keys(spec.rows)
    first = gen.rows(live_keys)
    live_city = first.column("city").to_pylist()
    results = _write_batch(writer, spec, gen, first, None, first)
    for _ in range(spec.commits - 1):
        n_live = len(live_keys)
        n_upd = round(n_live * spec.update_fraction)
        n_del = round(n_live * spec.delete_fraction)
        picked = gen.choose(n_live, n_upd + n_del)
        upd, dele = picked[:n_upd], picked[n_upd:]
        updates = gen.rows([live_keys[i] for i in upd], [live_city[i] for i in upd])
        new_keys = gen.keys(max(0, spec.rows - len(upd) - len(dele)))
        inserts = gen.rows(new_keys)
        deletes = pa.table(
            {
                "uuid": pa.array([live_keys[i] for i in dele], pa.string()),
                "city": pa.array([live_city[i] for i in dele], pa.string()),
            }
        )
        batch = pa.concat_tables([updates, inserts])
        results.extend(_write_batch(writer, spec, gen, batch, deletes if deletes.num_rows else None, inserts))
        gone = set(int(i) for i in dele)
        live_keys = [k for i, k in enumerate(live_keys) if i not in gone] + new_keys
        live_city = [c for i, c in enumerate(live_city) if i not in gone] + inserts.column("city").to_pylist()
    return results


def _write_batch(
    writer: TableWriter,
    spec: GenerateSpec,
    gen: TripGenerator,
    batch: pa.Table,
    deletes: pa.Table | None,
    new_rows: pa.Table,
) -> list[CommitResult]:
    """Write one batch with the spec's operation (see the module doc); returns the commits it took."""
    if spec.operation == "upsert":
        return [writer.upsert(batch, deletes)]
    if spec.operation == "bulk_insert":
        repeats = gen.choose(new_rows.num_rows, round(new_rows.num_rows * spec.update_fraction))
        again = new_rows.take(pa.array(np.sort(repeats)))
        if again.num_rows:  # the same keys and partitions, later values
            fresh = gen.rows(again.column("uuid").to_pylist(), again.column("city").to_pylist())
            batch = pa.concat_tables([batch, fresh])
        results = [writer.bulk_insert(batch)]
    else:
        results = [writer.insert(batch)]
    if deletes is not None:
        results.append(writer.delete(deletes))
    return results


def _decimal_from_units(units: np.ndarray, typ: pa.Decimal128Type) -> pa.Array:
    """Decimals whose unscaled values are ``units`` (int64), built straight into Arrow's 128-bit storage."""
    storage = np.empty((len(units), 2), dtype=np.int64)
    storage[:, 0] = units
    storage[:, 1] = units >> 63  # sign extension of the high word
    return pa.Array.from_buffers(typ, len(units), [None, pa.py_buffer(storage.tobytes())])
