"""hudi-rs (the PyPI package ``hudi``) as the independent judge of what our reader returns.

hudi-rs runs in a child process, never in pytest's own: it can *panic* (``pyo3_runtime.PanicException``, a
``BaseException``), print Rust backtraces, or abort the process, and none of that may take the test session
down or spill into its output. The child reads a JSON request, answers each query in turn, writes every
table result as an Arrow IPC file into a temporary folder and every outcome as one JSON line, so whatever it
finished before dying is kept; the query it died on is reported as a crash, the rest go to a new child.

Queries for one table are batched into one child (start-up costs ~0.3 s, a query a few ms), and results are
cached per (table root, query) for the life of the :class:`HudiOracle`, so several tests can ask for the same
answer.

Usage::

    oracle = HudiOracle(tmp_dir)
    snap, ro = oracle.run(root, [Query.snapshot(), Query.read_optimized()])
    if isinstance(snap, OracleRows): ...          # snap.table is a pyarrow.Table
    else: ...                                     # OracleFailure: snap.kind, snap.message

Run as a script on table roots to survey what hudi-rs can read::

    python tests/support/hudi_oracle.py /tmp/tables/some_table [...]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

# hudi-rs's read option keys (hudi._internal._config_keys(): HudiReadConfig / HudiTableConfig).
READ_OPTIMIZED_KEY = "hoodie.read.use.read_optimized.mode"
METADATA_PARTITIONS_KEY = "hoodie.table.metadata.partitions"

QueryKind = Literal["snapshot", "read_optimized", "incremental", "timeline", "file_slices"]
FailureKind = Literal["error", "panic", "crash", "timeout"]

Options = Mapping[str, str] | None
Patch = Mapping[str, str | None] | None

#: Seconds one child may take for its whole batch before it is killed.
BATCH_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Query:
    """One question for hudi-rs about one table.

    ``options`` are hudi options given to hudi-rs's table builder. ``patch`` asks hudi-rs about a *patched
    copy* of the table (hard links, ``hoodie.properties`` rewritten: a key set to ``None`` is removed); it is
    the way around hudi-rs limits that are not about the data, e.g. :data:`NO_METADATA_TABLE` makes it list
    files instead of reading the metadata table, whose table properties win over builder options.
    """

    kind: QueryKind
    as_of: str | None = None
    start: str | None = None
    end: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    patch: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def snapshot(cls, as_of: str | None = None, *, options: Options = None, patch: Patch = None) -> Query:
        return cls("snapshot", as_of=as_of, options=_items(options), patch=_items(patch))

    @classmethod
    def read_optimized(
        cls, as_of: str | None = None, *, options: Options = None, patch: Patch = None
    ) -> Query:
        return cls("read_optimized", as_of=as_of, options=_items(options), patch=_items(patch))

    @classmethod
    def incremental(
        cls, start: str, end: str | None = None, *, options: Options = None, patch: Patch = None
    ) -> Query:
        return cls("incremental", start=start, end=end, options=_items(options), patch=_items(patch))

    @classmethod
    def timeline(cls, *, options: Options = None, patch: Patch = None) -> Query:
        return cls("timeline", options=_items(options), patch=_items(patch))

    @classmethod
    def file_slices(cls, as_of: str | None = None, *, options: Options = None, patch: Patch = None) -> Query:
        return cls("file_slices", as_of=as_of, options=_items(options), patch=_items(patch))

    def patched(self, patch: Mapping[str, str | None]) -> Query:
        """The same question about a copy of the table with ``patch`` applied to its properties."""
        merged = dict(self.patch)
        merged.update(patch)
        return replace(self, patch=tuple(sorted(merged.items())))

    def describe(self) -> str:
        parts = [self.kind]
        if self.as_of:
            parts.append(f"as_of={self.as_of}")
        if self.start is not None:
            parts.append(f"({self.start}, {self.end or 'latest'}]")
        parts.extend(f"{k}={v}" for k, v in self.options)
        parts.extend(f"patched {k}={v!r}" for k, v in self.patch)
        return " ".join(parts)


def _items(mapping: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((mapping or {}).items()))


#: Patch that makes hudi-rs list the file system instead of reading the metadata table (it uses the MDT
#: whenever ``files`` is in ``hoodie.table.metadata.partitions``, whatever ``hoodie.metadata.enable`` says).
NO_METADATA_TABLE: Mapping[str, str | None] = {METADATA_PARTITIONS_KEY: ""}


@dataclass(frozen=True)
class OracleInstant:
    """A completed instant as hudi-rs's timeline lists it."""

    time: str
    action: str


@dataclass(frozen=True)
class OracleRows:
    """hudi-rs answered with rows. ``table`` holds every column hudi-rs returned, meta columns included."""

    table: pa.Table
    #: Distinct schemas among hudi-rs's record batches, when they were not all the same (a hudi-rs quirk to
    #: know about: the batches were concatenated with permissive type promotion).
    batch_schemas_differ: bool = False


@dataclass(frozen=True)
class OracleTimeline:
    """hudi-rs's completed write instants (commits, deltacommits, replacecommits), in time order."""

    instants: tuple[OracleInstant, ...]

    @property
    def times(self) -> list[str]:
        return [i.time for i in self.instants]


@dataclass(frozen=True)
class OracleFileSlices:
    """hudi-rs's file slices: (partition path, file id, base file name, log file names)."""

    slices: tuple[tuple[str, str, str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class OracleFailure:
    """hudi-rs could not answer: it raised (``error``), panicked, the child died, or it ran out of time."""

    kind: FailureKind
    message: str
    stderr: str = ""

    def __str__(self) -> str:
        return f"hudi-rs {self.kind}: {self.message}"


OracleResult = OracleRows | OracleTimeline | OracleFileSlices | OracleFailure


@dataclass
class HudiOracle:
    """Runs hudi-rs queries in child processes and caches the answers per (table root, query)."""

    work_dir: Path
    timeout_s: float = BATCH_TIMEOUT_S
    _cache: dict[tuple[str, Query], OracleResult] = field(default_factory=dict)
    _patched: dict[tuple[str, tuple[tuple[str, str | None], ...]], str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counter: int = 0

    def run(self, root: str | os.PathLike[str], queries: Sequence[Query]) -> list[OracleResult]:
        """Answer ``queries`` about the table at ``root``, in order, running only the uncached ones.

        Queries on the table itself go to one child; those on a patched copy, one child per patch.
        """
        # A URI (s3://bucket/table: hudi-rs reads the store's environment variables) is kept as given.
        key_root = str(root) if "://" in str(root) else str(Path(root).resolve())
        with self._lock:
            missing = [q for q in dict.fromkeys(queries) if (key_root, q) not in self._cache]
            by_patch: dict[tuple[tuple[str, str | None], ...], list[Query]] = {}
            for q in missing:
                by_patch.setdefault(q.patch, []).append(q)
            for patch, group in by_patch.items():
                target = self._patched_copy(key_root, patch) if patch else key_root
                for q, result in zip(group, self._run_batch(target, group), strict=True):
                    self._cache[(key_root, q)] = result
            return [self._cache[(key_root, q)] for q in queries]

    def one(self, root: str | os.PathLike[str], query: Query) -> OracleResult:
        return self.run(root, [query])[0]

    def rows(self, root: str | os.PathLike[str], query: Query) -> pa.Table:
        """The rows of ``query``, or an AssertionError carrying hudi-rs's failure."""
        result = self.one(root, query)
        if not isinstance(result, OracleRows):
            raise AssertionError(f"hudi-rs cannot answer {query.describe()} on {root}: {result}")
        return result.table

    def completed_write_instants(self, root: str | os.PathLike[str], patch: Patch = None) -> OracleTimeline:
        """hudi-rs's completed commits, deltacommits and replacecommits (AssertionError if it cannot list)."""
        result = self.one(root, Query.timeline(patch=patch))
        if not isinstance(result, OracleTimeline):
            raise AssertionError(f"hudi-rs cannot list the timeline of {root}: {result}")
        return result

    # -- the child process ---------------------------------------------------------------------------------

    def _patched_copy(self, root: str, patch: tuple[tuple[str, str | None], ...]) -> str:
        """A copy of the table (hard links where possible) with ``hoodie.properties`` patched; made once."""
        key = (root, patch)
        if key not in self._patched:
            self._counter += 1
            target = self.work_dir / f"patched{self._counter}" / Path(root).name
            skip_mdt = dict(patch).get(METADATA_PARTITIONS_KEY) == ""

            def ignore(folder: str, names: list[str]) -> list[str]:
                if skip_mdt and Path(folder) == Path(root) / ".hoodie":
                    return [n for n in names if n == "metadata"]
                return []

            shutil.copytree(root, target, copy_function=_link_or_copy, ignore=ignore)
            props = target / ".hoodie" / "hoodie.properties"
            text = props.read_text(encoding="utf-8")
            props.unlink()  # a hard link: never write through it into the source table
            props.write_text(patch_properties(text, dict(patch)), encoding="utf-8")
            self._patched[key] = str(target)
        return self._patched[key]

    def _run_batch(self, root: str, queries: list[Query]) -> list[OracleResult]:
        results: list[OracleResult] = []
        remaining = list(queries)
        while remaining:
            done = self._run_child(root, remaining)
            results.extend(done)
            remaining = remaining[len(done) :]
        return results

    def _run_child(self, root: str, queries: list[Query]) -> list[OracleResult]:
        """Run one child on ``queries``; returns at least one result (the one it died on, if it died)."""
        self._counter += 1
        self.work_dir.mkdir(parents=True, exist_ok=True)
        out_dir = Path(tempfile.mkdtemp(prefix=f"oracle{self._counter}_", dir=self.work_dir))
        request = {
            "root": root,
            "out_dir": str(out_dir),
            "queries": [
                {"kind": q.kind, "as_of": q.as_of, "start": q.start, "end": q.end, "options": dict(q.options)}
                for q in queries
            ],
        }
        request_path = out_dir / "request.json"
        request_path.write_text(json.dumps(request))
        env = dict(os.environ, RUST_BACKTRACE="0", RUST_LOG="off", PYTHONWARNINGS="ignore")
        timed_out = False
        try:
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--worker", str(request_path)],
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout_s,
                check=False,
            )
            stderr, returncode = proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            timed_out = True
            stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            returncode = -1
        results: list[OracleResult] = []
        lines_path = out_dir / "results.jsonl"
        lines = lines_path.read_text().splitlines() if lines_path.exists() else []
        for line in lines:
            record = json.loads(line)
            results.append(_decode_result(record, out_dir, stderr))
        if len(results) < len(queries):
            # The child died (or hung) on query number len(results).
            tail = _tail(stderr)
            if timed_out:
                results.append(OracleFailure("timeout", f"no answer within {self.timeout_s:.0f} s", tail))
            else:
                message = _panic_message(stderr) or f"child exited with status {returncode}"
                results.append(OracleFailure("crash", message, tail))
        return results


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def patch_properties(text: str, patch: Mapping[str, str | None]) -> str:
    """``text`` (a Java properties file) with the keys of ``patch`` set, or removed where the value is None.

    Values are written verbatim: hudi-rs reads them so (it does not undo ``\\:`` escapes).
    """
    out: list[str] = []
    done: set[str] = set()
    for line in text.splitlines():
        stripped = line.strip()
        key = stripped.split("=", 1)[0].strip().replace("\\:", ":") if "=" in stripped else None
        if key is not None and not stripped.startswith(("#", "!")) and key in patch:
            done.add(key)
            if patch[key] is not None:
                out.append(f"{key}={patch[key]}")
            continue
        out.append(line)
    out.extend(f"{k}={v}" for k, v in patch.items() if k not in done and v is not None)
    return "\n".join(out) + "\n"


def _decode_result(record: dict[str, Any], out_dir: Path, stderr: str) -> OracleResult:
    status = record["status"]
    if status == "rows":
        with pa.OSFile(str(out_dir / record["file"]), "rb") as f:
            table = pa.ipc.open_file(f).read_all()
        return OracleRows(table, batch_schemas_differ=record.get("schemas_differ", False))
    if status == "timeline":
        return OracleTimeline(tuple(OracleInstant(t, a) for t, a in record["instants"]))
    if status == "file_slices":
        return OracleFileSlices(tuple((p, f, b, tuple(logs)) for p, f, b, logs in record["slices"]))
    kind: FailureKind = "panic" if status == "panic" else "error"
    return OracleFailure(kind, record["message"], _tail(stderr))


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _panic_message(stderr: str) -> str | None:
    for line in stderr.splitlines():
        if "panicked at" in line:
            return line.strip()
    return None


def survey(oracle: HudiOracle, root: str, queries: Iterable[Query]) -> dict[str, str]:
    """A short textual outcome per query (for the survey script and for test reports)."""
    out: dict[str, str] = {}
    queries = list(queries)
    for q, r in zip(queries, oracle.run(root, queries), strict=True):
        if isinstance(r, OracleRows):
            out[q.describe()] = f"{r.table.num_rows} rows, {r.table.num_columns} cols"
        elif isinstance(r, OracleTimeline):
            out[q.describe()] = f"{len(r.instants)} instants"
        elif isinstance(r, OracleFileSlices):
            out[q.describe()] = f"{len(r.slices)} file slices"
        else:
            out[q.describe()] = str(r).splitlines()[0][:200]
    return out


# -- the worker: runs inside the child process -----------------------------------------------------------


def _worker(request_path: str) -> None:  # pragma: no cover - runs in the child
    request = json.loads(Path(request_path).read_text())
    root: str = request["root"]
    out_dir = Path(request["out_dir"])
    import hudi

    tables: dict[tuple[tuple[str, str], ...], Any] = {}

    def table_for(options: dict[str, str]) -> Any:
        key = tuple(sorted(options.items()))
        if key not in tables:
            builder = hudi.HudiTableBuilder.from_base_uri(root)
            if options:
                builder = builder.with_hudi_options(dict(options))
            tables[key] = builder.build()
        return tables[key]

    with open(out_dir / "results.jsonl", "a", encoding="utf-8") as results:
        for index, q in enumerate(request["queries"]):
            try:
                record = _answer(hudi, table_for(q["options"]), q, out_dir, index)
            except Exception as e:
                record = {"status": "error", "message": f"{type(e).__name__}: {e}"}
            except BaseException as e:  # pyo3_runtime.PanicException derives from BaseException
                if isinstance(e, KeyboardInterrupt | SystemExit):
                    raise
                record = {"status": "panic", "message": f"{type(e).__name__}: {e}"}
            results.write(json.dumps(record) + "\n")
            results.flush()


def _answer(hudi: Any, table: Any, q: dict[str, Any], out_dir: Path, index: int) -> dict[str, Any]:
    kind = q["kind"]
    if kind == "timeline":
        timeline = table.get_timeline()
        seen: dict[str, str] = {}
        for getter in ("get_completed_commits", "get_completed_deltacommits", "get_completed_replacecommits"):
            for instant in getattr(timeline, getter)():
                seen[instant.timestamp] = instant.action
        return {"status": "timeline", "instants": sorted(seen.items())}
    options = hudi.HudiReadOptions()
    if kind == "incremental":
        options = options.with_query_type(hudi.HudiQueryType.Incremental).with_start_timestamp(q["start"])
        if q["end"]:
            options = options.with_end_timestamp(q["end"])
    else:
        if q["as_of"]:
            options = options.with_as_of_timestamp(q["as_of"])
        if kind == "read_optimized":
            options = options.with_hudi_option(READ_OPTIMIZED_KEY, "true")
    if kind == "file_slices":
        slices = [
            (s.partition_path, s.file_id, s.base_file_name, list(s.log_file_names))
            for s in table.get_file_slices(options)
        ]
        return {"status": "file_slices", "slices": sorted(slices)}
    batches = table.read(options)
    schemas_differ = False
    if batches:
        schemas = {b.schema for b in batches}
        schemas_differ = len(schemas) > 1
        if schemas_differ:
            result = pa.concat_tables(
                [pa.Table.from_batches([b]) for b in batches], promote_options="permissive"
            )
        else:
            result = pa.Table.from_batches(batches)
    else:
        try:
            schema = table.get_schema_with_meta_fields()
        except Exception:
            schema = pa.schema([])
        result = schema.empty_table()
    name = f"{index}.arrow"
    with pa.OSFile(str(out_dir / name), "wb") as sink, pa.ipc.new_file(sink, result.schema) as writer:
        writer.write_table(result)
    return {"status": "rows", "file": name, "schemas_differ": schemas_differ}


def _main(argv: list[str]) -> int:  # pragma: no cover - a developer's tool
    if len(argv) == 2 and argv[0] == "--worker":
        _worker(argv[1])
        return 0
    with tempfile.TemporaryDirectory(prefix="hudi_oracle_") as tmp:
        oracle = HudiOracle(Path(tmp))
        for root in argv:
            timeline = oracle.one(root, Query.timeline())
            queries = [Query.timeline(), Query.snapshot(), Query.read_optimized()]
            queries += [q.patched(NO_METADATA_TABLE) for q in queries[1:]]
            if isinstance(timeline, OracleTimeline):
                queries += [Query.snapshot(as_of=t) for t in timeline.times]
            print(root)
            for k, v in survey(oracle, root, queries).items():
                print(f"    {k}: {v}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
