"""The ``hoodied`` command line.

    hoodied --version
    hoodied run --config FILE [--once]
    hoodied status --config FILE [--json]
    hoodied read PATH --out FILE.parquet [--as-of T] [--read-optimized]
    hoodied timeline PATH [--archived]
    hoodied fsview PATH [--as-of T]
    hoodied generate PATH --table-type mor --table-version 8 --rows N --commits K --update-fraction F
                     --delete-fraction D --partitions P [--log-format avro|parquet] [--seed S]
                     [--operation upsert|insert|bulk_insert]
    hoodied compact PATH --mode schedule|execute|schedule-and-execute [--instant T [--take-over]]
                    [--strategy NAME] [--spark-master URL] [--conf key=value ...]
    hoodied clean PATH [--mode schedule|execute|schedule-and-execute] [--instant T [--take-over]]
                  [--policy NAME] [--spark] [--spark-master URL] [--conf key=value ...]
    hoodied cluster PATH --mode schedule|execute|schedule-and-execute [--instant T [--take-over]]
                    [--sort-columns a,b] [--spark-master URL] [--conf key=value ...]
    hoodied index PATH --mode schedule|execute|schedule-and-execute|dropindex [--index-types a,b]
                  [--instant T [--take-over]] [--spark-master URL] [--conf key=value ...]
    hoodied logcompact PATH --mode schedule|execute|schedule-and-execute [--instant T [--take-over]] [--spark]
                       [--conf key=value ...]
    hoodied ttl PATH --mode schedule|execute|schedule-and-execute [--instant T [--take-over]] [--spark]
                [--conf key=value ...]
    hoodied savepoint create|delete|list PATH [T] [--user U] [--comments C]
    hoodied restore PATH T [--conf key=value ...]
    hoodied archive PATH [--conf key=value ...]
    hoodied demo [--path DIR] [--duration S] [--port N] [--interval S] [--batch-rows N] [--drain-timeout S]

Exit status 3: a clustering aborted on a conflict with a write (rolled back; schedule again), an instant
another run holds (its heartbeat is fresh: the message names the replica, host, pid and since when;
``--take-over`` waits for the heartbeat to expire, then runs it), an inflight instant that hoodied did not
start was left alone (its owner may be running it: ``--take-over`` runs it), a run that lost the race to
another (nothing of the winner's is touched), or an indexing waits for older pending writes (run it again once
they completed).

Errors print one line (``hoodied: error: ...``) to stderr and exit with status 2 for bad input (a table we
refuse, a damaged file) or 1 for anything unexpected.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hoodie.errors import HoodieError
from hoodied import package_version
from hoodied.errors import ServiceError
from hoodied.keys import check_keys

if TYPE_CHECKING:
    from hoodie.lock import LockProvider
    from hoodie.storage import Storage
    from hoodie.write.late_files import LateFiles


def _cmd_read(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from hoodie import Table

    table = Table.open(args.path, _storage_options(args))
    result = table.read(as_of=args.as_of, read_optimized=args.read_optimized)
    pq.write_table(result, args.out)
    print(f"wrote {result.num_rows} rows, {result.num_columns} columns to {args.out}")
    return 0


def _cmd_timeline(args: argparse.Namespace) -> int:
    from hoodie import Table
    from hoodie.timeline.archived.load import load_archived_timeline

    table = Table.open(args.path, _storage_options(args))
    active = list(table.timeline)
    rows = [(i, "active") for i in active]
    if args.archived:
        times = {i.time for i in active}
        history = load_archived_timeline(table.storage, table.config)
        rows = [(e.instant, "archived") for e in history if e.time not in times] + rows
        rows.sort(key=lambda r: (r[0].time, r[0].state))
    print(
        f"{'instant':<18} {'action':<14} {'state':<10} completion"
        + ("         where" if args.archived else "")
    )
    for instant, where in rows:
        completion = instant.completion_time or "-"
        line = f"{instant.time:<18} {instant.action:<14} {instant.state.name:<10} {completion:<18}"
        print(f"{line} {where}" if args.archived else line.rstrip())
    if args.archived:
        print(f"{len(rows) - len(active)} archived, {len(active)} active")
    return 0


def _cmd_service(args: argparse.Namespace) -> int:
    """A table service's one-off run, the same for every service without a command of its own (``ttl``,
    ``logcompact``): schedule (its trigger and planning, as the daemon does), execute (the earliest pending
    instant, or ``--instant``), or both."""
    from hoodie.registry import service_named
    from hoodie.table import Table

    service = service_named(args.service)
    hoodie_conf, spark_conf = _parse_conf(args.conf or [])
    storage, lock = _open_for_service(args, hoodie_conf, service.name)
    table = Table.load(storage)
    settings = {**table.config.props, **hoodie_conf}
    service.check_settings(settings)
    not_here = service.applies_to(table.config)
    if not_here is not None:
        print(f"no {service.name} on {args.path}: {not_here}")
        return 0
    instant = args.instant
    if args.mode in ("schedule", "schedule-and-execute"):
        if args.instant:
            raise ValueError(
                f"--instant names a pending {service.name} to execute; schedule takes a fresh time"
            )
        scheduled = service.schedule(table, lock, settings)
        if scheduled.instant is None:
            print(f"no {service.name} scheduled: {scheduled.reason}")
            if args.mode == "schedule" or not service.pending(Table.load(storage)):
                return 0
        else:
            print(f"scheduled {service.name} {scheduled.instant.time}: {scheduled.reason}")
            if args.mode == "schedule":
                return 0
            instant = scheduled.instant.time
    return _run_pending(
        args, service.name, storage, lock, instant, settings, spark_conf, use_spark=args.spark
    )


def _add_service_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], command: str, service: str, help: str
) -> None:
    p = sub.add_parser(command, help=help)
    p.add_argument("path")
    p.add_argument("--mode", choices=["schedule", "execute", "schedule-and-execute"], required=True)
    _add_instant_option(p, service)
    p.add_argument("--spark", action="store_true", help="run the tasks as a Spark job (default: here)")
    p.add_argument("--spark-master", default="local[*]", help="Spark master with --spark (default: local[*])")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* or spark.* setting")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_service, service=service)


def _cmd_savepoint(args: argparse.Namespace) -> int:
    import datetime as dt

    from hoodie.savepoint.savepoint import create_savepoint, delete_savepoint, read_savepoint, savepoints
    from hoodie.table import Table

    hoodie_conf, _ = _parse_conf(args.conf or [])
    storage, lock = _open_for_service(args, hoodie_conf, "savepoint")
    if args.action == "list":
        table = Table.load(storage)
        found = savepoints(table.timeline)
        for instant in found:
            md = read_savepoint(table, instant.time)
            at = dt.datetime.fromtimestamp(md.savepointed_at / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            files = sum(len(p.savepoint_data_file) for p in md.partition_metadata.values())
            print(
                f"{instant.time}  by {md.savepointed_by or '-'} at {at} UTC  {files} file(s)  {md.comments}"
            )
        if not found:
            print(f"no savepoint on {args.path}")
        return 0
    if not args.instant:
        raise ValueError(f"savepoint {args.action} needs the instant: hoodied savepoint {args.action} PATH T")
    if args.action == "create":
        result = create_savepoint(storage, lock, args.instant, user=args.user, comments=args.comments or "")
        print(f"savepoint {args.instant} created: {result.files} file(s) kept from cleaning")
    else:
        delete_savepoint(storage, lock, args.instant)
        print(f"savepoint {args.instant} deleted")
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    from hoodie.savepoint.restore import restore_to_savepoint

    hoodie_conf, _ = _parse_conf(args.conf or [])
    storage, lock = _open_for_service(args, hoodie_conf, "restore")
    result = restore_to_savepoint(storage, lock, args.instant, settings=hoodie_conf)
    print(
        f"restore {result.instant.time} to savepoint {result.savepoint_time}"
        + (" (an interrupted one, finished)" if result.resumed else "")
        + f": {len(result.rolled_back)} instant(s) rolled back, {result.files_deleted} file(s) deleted; "
        f"metadata table: {result.metadata_table}"
    )
    return 0


def _cmd_archive(args: argparse.Namespace) -> int:
    from hoodie.archival.service import ARCHIVAL
    from hoodie.table import Table

    hoodie_conf, _ = _parse_conf(args.conf or [])
    storage, lock = _open_for_service(args, hoodie_conf, "archive")
    table = Table.load(storage)
    settings = {**table.config.props, **hoodie_conf}
    ARCHIVAL.check_settings(settings)
    done = ARCHIVAL.maintain(table, lock, settings)
    print(done.summary)
    return 0


def _cmd_fsview(args: argparse.Namespace) -> int:
    from hoodie import Table

    table = Table.open(args.path, _storage_options(args))
    groups = table.file_groups(args.as_of)
    live = {s.group for s in table.file_slices(args.as_of)}
    for gid, group in groups.items():
        state = "" if gid in live else "  (replaced)"
        print(f"file group {gid}{state}")
        for s in group.ordered():
            base = s.base_file.file_name if s.base_file else "-"
            print(f"  slice {s.base_instant}: base {base} ({s.base_file_size} B)")
            for lf, size in zip(s.log_files, s.log_file_sizes, strict=True):
                print(f"    log {lf.file_name} ({size} B)")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from hoodie.testing.generate import GenerateSpec, generate_table

    spec = GenerateSpec(
        table_type="MERGE_ON_READ" if args.table_type == "mor" else "COPY_ON_WRITE",
        table_version=args.table_version,
        rows=args.rows,
        commits=args.commits,
        update_fraction=args.update_fraction,
        delete_fraction=args.delete_fraction,
        partitions=args.partitions,
        log_format=args.log_format,
        seed=args.seed,
        name=args.name,
        operation=args.operation,
    )
    for result in generate_table(args.path, spec, storage_options=_storage_options(args)):
        md = result.metadata
        files = len(md.write_stats)
        rows = sum(s.num_writes or 0 for s in md.write_stats)
        print(
            f"{result.instant_time} {result.instant.action} {md.operation_type}: "
            f"{files} files, {rows} rows written"
        )
    return 0


def _parse_conf(pairs: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """``key=value`` pairs split into Hudi settings (``hoodie.*``) and Spark settings (``spark.*``); a
    misspelt ``hoodie.*`` key is an error, one hoodied does not read a warning (:mod:`hoodied.keys`)."""
    hoodie_conf: dict[str, str] = {}
    spark_conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--conf {pair!r}: expected key=value")
        if key.startswith("hoodie."):
            hoodie_conf[key] = value
        elif key.startswith("spark."):
            spark_conf[key] = value
        else:
            raise ValueError(f"--conf {key}: only hoodie.* and spark.* settings are accepted")
    report = check_keys(hoodie_conf, "--conf")
    if report.errors:
        raise ServiceError(report.errors[0])
    for warning in report.warnings:
        print(f"hoodied: warning: {warning}", file=sys.stderr)
    return hoodie_conf, spark_conf


def _open_for_service(
    args: argparse.Namespace, hoodie_conf: dict[str, str], command: str
) -> tuple[Storage, LockProvider]:
    """The table's storage (``--storage-option``s and the store's environment variables, the retry budget
    fitted to the table's leases as the daemon's configuration does: :mod:`hoodie.lease_margin`) and the
    lock its writers use (:func:`hoodied.locks.one_off_lock`); deletes the metadata table first when the
    settings disable it (as Hudi's writers do)."""
    from hoodie.lease_margin import check_store_fits_lease
    from hoodie.metadata_table import METADATA_ENABLE, delete_metadata_table
    from hoodie.storage import Storage
    from hoodied.locks import one_off_lock

    fit = check_store_fits_lease(args.path, _storage_options(args), hoodie_conf)
    for warning in fit.warnings:
        print(f"hoodied: warning: --storage-option: {warning}", file=sys.stderr)
    storage = Storage.for_uri(args.path, fit.options)
    lock = one_off_lock(storage, hoodie_conf, args.cleanup)
    if hoodie_conf.get(METADATA_ENABLE, "").strip().lower() == "false" and delete_metadata_table(
        storage, lock
    ):
        print(f"deleted the metadata table of {args.path} ({METADATA_ENABLE}=false, as Hudi's writers do)")
    return storage, lock


def _storage_options(args: argparse.Namespace) -> dict[str, str]:
    """``--storage-option KEY=VALUE`` pairs (credentials and endpoints of an object store)."""
    out: dict[str, str] = {}
    for pair in getattr(args, "storage_option", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--storage-option {pair.split('=', 1)[0]!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _cmd_compact(args: argparse.Namespace) -> int:
    from hoodie.compaction.plan import schedule_compaction
    from hoodie.compaction.strategy import STRATEGY, CompactionConfig
    from hoodie.config import TableConfig
    from hoodie.failpoints import arm_for_children, failpoint

    arm_for_children()
    hoodie_conf, spark_conf = _parse_conf(args.conf or [])
    if args.strategy:
        hoodie_conf[STRATEGY] = args.strategy
    config = CompactionConfig.from_config(hoodie_conf)
    storage, lock = _open_for_service(args, hoodie_conf, "compact")
    instant = args.instant
    if args.mode in ("schedule", "schedule-and-execute"):
        if args.instant:
            raise ValueError("--instant names a pending compaction to execute; schedule takes a fresh time")
        scheduled = schedule_compaction(storage, lock, config=config)
        if scheduled.instant is None:
            print(f"no compaction scheduled: {scheduled.reason}")
            return 0
        assert scheduled.plan is not None
        print(
            f"scheduled compaction {scheduled.instant.time}: {len(scheduled.plan.operations)} file slice(s) "
            f"({scheduled.reason})"
        )
        failpoint("compaction.after_schedule")
        if args.mode == "schedule":
            return 0
        instant = scheduled.instant.time
    settings = {**TableConfig.load(storage).props, **hoodie_conf}
    return _run_pending(args, "compaction", storage, lock, instant, settings, spark_conf)


def _run_pending(
    args: argparse.Namespace,
    name: str,
    storage: Storage,
    lock: LockProvider,
    instant: str | None,
    settings: dict[str, str],
    spark_conf: dict[str, str],
    *,
    use_spark: bool = True,
) -> int:
    """Run the service's pending instant ``instant`` (default: the earliest) under a local claim, and say
    what it did. Without Spark the tasks run on threads here."""
    from hoodie.errors import CommitConflict, Deferred, NothingToDo
    from hoodie.registry import service_named
    from hoodie.table import Table
    from hoodie.write.markers import sweep_completed
    from hoodied.claims import LocalClaim
    from hoodied.errors import ClaimHeld, ForeignInstant
    from hoodied.jobs import run_service_job
    from hoodied.ownership import NEVER
    from hoodied.spark import SparkConfig, spark_session

    service = service_named(name)
    if instant is None:
        current = Table.load(storage)
        pending = service.pending(current)
        if not pending:
            sweep_completed(storage, current.timeline.is_completed)
            print(f"no pending {name} on {args.path}")
            return 0
        instant = pending[0].time
    claim = LocalClaim(storage, name, instant)
    try:
        claim.acquire()
    except ClaimHeld as e:  # another command on this machine runs it: as with a live lease, exit 3
        print(f"{name} {instant} is being run by another command on this machine: {e}")
        return 3
    late: list[LateFiles] = []  # where attempts this run voided may land files late (a takeover's)
    try:
        spark = spark_session(SparkConfig(master=args.spark_master, conf=spark_conf)) if use_spark else None
        while True:
            try:
                run = run_service_job(
                    spark,
                    service,
                    storage,
                    lock,
                    instant,
                    settings=settings,
                    fence=claim.check,
                    replica="hoodied-cli",
                    foreign_after=0.0 if args.take_over else NEVER,
                    late_files=late.append,
                )
                break
            except NothingToDo as e:
                if e.unknown:  # a time that names no instant of the service: the caller's mistake
                    print(f"hoodied: error: {e}", file=sys.stderr)
                    return 2
                print(str(e))
                return 0
            except ForeignInstant as e:
                wait = _until_lease_expires(storage, instant, settings) if args.take_over else None
                if wait is None:
                    hint = "" if args.take_over else "; --take-over runs it once its heartbeat expired"
                    print(f"{e}{hint}")
                    return 3
                print(f"{e}; --take-over: waiting {wait:.0f} s for its heartbeat to expire", flush=True)
                time.sleep(wait)
            except Deferred as e:
                print(f"{name} {instant} not run yet: {e}")
                return 3
            except CommitConflict as e:
                print(f"{name} {instant} aborted: {e}")
                return 3
    finally:
        claim.release()
        _sweep_late_files(storage, late)
    print(
        f"completed {name} {instant}: {run.done.summary}, in {run.seconds:.1f} s ({run.tasks} task(s) "
        + ("on Spark)" if run.on_executors else "in this process)")
    )
    return 0


def _sweep_late_files(storage: Storage, late: list[LateFiles]) -> None:
    """Sweep once what the attempts a takeover voided landed late (:mod:`hoodie.write.late_files`); a daemon
    polling the table finds the void decisions after the rollback and sweeps again until the horizon."""
    for files in late:
        try:
            deleted = files.sweep(storage)
        except (HoodieError, OSError) as e:
            print(f"cannot sweep the late files of {files.instant_time}: {e}", file=sys.stderr)
            continue
        print(
            f"{files.instant_time}: deleted {len(deleted)} file(s) that voided attempt(s) landed late; "
            "requests still held may land more until jobs.late_request_horizon (a daemon polling the "
            "table sweeps them)"
        )


def _until_lease_expires(storage: Storage, instant: str, settings: Mapping[str, str]) -> float | None:
    """Seconds until the heartbeat of ``instant`` expires (a little more), or ``None`` when it is not fresh
    (then the instant was refused for another reason, which waiting does not change)."""
    from hoodie.write.heartbeat import HeartbeatConfig, read_lease

    config = HeartbeatConfig.from_config(settings)
    lease = read_lease(storage, instant)
    now_ms = int(time.time() * 1000)
    if not lease.alive(config, now_ms):
        return None
    return max(0.0, (lease.beat_ms + config.expiry_ms - now_ms) / 1000) + 0.5


def _cmd_clean(args: argparse.Namespace) -> int:
    from hoodie.clean.plan import POLICY, CleanConfig, FailedWritesPolicy, pending_cleans, schedule_clean
    from hoodie.failpoints import arm_for_children, failpoint
    from hoodie.table import Table
    from hoodie.write.failed_writes import rollback_failed_writes
    from hoodie.write.heartbeat import HeartbeatConfig

    arm_for_children()
    hoodie_conf, spark_conf = _parse_conf(args.conf or [])
    if args.policy:
        hoodie_conf[POLICY] = args.policy
    storage, lock = _open_for_service(args, hoodie_conf, "clean")
    table = Table.load(storage)
    settings = {**table.config.props, **hoodie_conf}
    config = CleanConfig.from_config(settings)
    instant = args.instant
    if args.mode in ("schedule", "schedule-and-execute"):
        if args.instant:
            raise ValueError("--instant names a pending clean to execute; schedule takes a fresh time")
        if config.failed_writes is FailedWritesPolicy.LAZY:
            for done in rollback_failed_writes(storage, lock, HeartbeatConfig.from_config(settings)):
                print(
                    f"rolled back failed write {done.rolled_back} (heartbeat expired): "
                    f"{len(done.deleted)} file(s) deleted"
                )
        scheduled = schedule_clean(storage, lock, config=config)
        if scheduled.instant is None:
            print(f"no clean scheduled: {scheduled.reason}")
            if args.mode == "schedule" or not pending_cleans(Table.load(storage)):
                return 0
        else:
            print(f"scheduled clean {scheduled.instant.time}: {scheduled.reason}")
            failpoint("clean.after_schedule")
            if args.mode == "schedule":
                return 0
            instant = scheduled.instant.time
    return _run_pending(args, "clean", storage, lock, instant, settings, spark_conf, use_spark=args.spark)


def _cmd_cluster(args: argparse.Namespace) -> int:
    from hoodie.clustering.plan import SORT_COLUMNS, ClusteringConfig, schedule_clustering
    from hoodie.failpoints import arm_for_children, failpoint
    from hoodie.table import Table

    arm_for_children()
    hoodie_conf, spark_conf = _parse_conf(args.conf or [])
    if args.sort_columns:
        hoodie_conf[SORT_COLUMNS] = args.sort_columns
    storage, lock = _open_for_service(args, hoodie_conf, "cluster")
    table = Table.load(storage)
    config = ClusteringConfig.from_config({**table.config.props, **hoodie_conf})
    instant = args.instant
    if args.mode in ("schedule", "schedule-and-execute"):
        if args.instant:
            raise ValueError("--instant names a pending clustering to execute; schedule takes a fresh time")
        scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
        if scheduled.instant is None:
            print(f"no clustering scheduled: {scheduled.reason}")
            return 0
        assert scheduled.plan is not None
        print(
            f"scheduled clustering {scheduled.instant.time}: {len(scheduled.plan.input_groups)} group(s) "
            f"({scheduled.reason})"
        )
        failpoint("clustering.after_schedule")
        if args.mode == "schedule":
            return 0
        instant = scheduled.instant.time
    settings = {**table.config.props, **hoodie_conf}
    return _run_pending(args, "clustering", storage, lock, instant, settings, spark_conf)


INDEX_MODES = ("schedule", "execute", "schedule-and-execute", "dropindex")


def _index_types(raw: str | None, mode: str) -> list[str]:
    """``--index-types`` as metadata-table partition names (Hudi's upper-case names too: ``COLUMN_STATS``);
    ``files`` (the whole metadata table) only for ``dropindex``."""
    from hoodie.indexing.execute import INDEXABLE, IndexingFailed
    from hoodie.metadata.records import MetadataPartition

    names = [t.strip().lower() for t in (raw or "").split(",") if t.strip()]
    if not names:
        raise ValueError(f"--mode {mode} needs --index-types (e.g. column_stats,bloom_filters,record_index)")
    allowed = [*sorted(INDEXABLE), *([MetadataPartition.FILES] if mode == "dropindex" else [])]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise IndexingFailed(
            f"--index-types {raw}: {', '.join(unknown)} is not an index hoodied "
            f"{'drops' if mode == 'dropindex' else 'builds'} (one of {', '.join(allowed)})"
        )
    return list(dict.fromkeys(names))


def _cmd_index(args: argparse.Namespace) -> int:
    from hoodie.failpoints import arm_for_children, failpoint
    from hoodie.indexing.execute import drop_index, pending_indexing, schedule_indexing
    from hoodie.metadata.records import MetadataPartition
    from hoodie.metadata_table import METADATA_ENABLE
    from hoodie.table import Table
    from hoodie.timeline.instant import State
    from hoodie.timeline.metadata import decode_index_plan

    arm_for_children()
    hoodie_conf, spark_conf = _parse_conf(args.conf or [])
    if hoodie_conf.get(METADATA_ENABLE, "").strip().lower() == "false":
        raise ValueError(f"--conf {METADATA_ENABLE}=false: indexes live in the metadata table")
    if args.instant and args.mode != "execute":
        raise ValueError("--instant names a pending indexing to execute; schedule takes a fresh time")
    index_types = _index_types(args.index_types, args.mode) if args.mode != "execute" else []
    storage, lock = _open_for_service(args, hoodie_conf, "index")
    if args.mode == "dropindex":
        table = Table.load(storage)
        for running in pending_indexing(table):
            plan = decode_index_plan(storage.read(table.timeline.file_of(running.time, State.REQUESTED)))
            busy = [i.metadata_partition_path or "" for i in plan.index_partition_infos]
            if any(t in busy or t == MetadataPartition.FILES for t in index_types):
                raise ValueError(
                    f"indexing {running.time} is building {', '.join(busy)}: complete it first "
                    f"(hoodied index {args.path} --mode execute --instant {running.time}), then drop"
                )
        dropped = drop_index(storage, lock, index_types)
        print(
            f"dropped {', '.join(dropped)} of {args.path}"
            if dropped
            else f"no index to drop: {', '.join(index_types)}"
        )
        return 0
    instant = args.instant
    if args.mode in ("schedule", "schedule-and-execute"):
        scheduled = schedule_indexing(storage, lock, index_types)
        if scheduled.instant is None:
            print(f"no indexing scheduled: {scheduled.reason}")
            return 0
        print(f"scheduled indexing {scheduled.instant.time}: {scheduled.reason}")
        failpoint("indexing.after_schedule")
        if args.mode == "schedule":
            return 0
        instant = scheduled.instant.time
    return _run_pending(args, "indexing", storage, lock, instant, hoodie_conf, spark_conf)


def _cmd_run(args: argparse.Namespace) -> int:
    from hoodied.daemon import main_run

    return main_run(args.config, once=args.once)


def _cmd_status(args: argparse.Namespace) -> int:
    from hoodied.config import DaemonConfig
    from hoodied.daemon import format_status, status_json, status_report

    report = status_report(DaemonConfig.load(args.config))
    print(status_json(report) if args.json else format_status(report))
    return 0


def _cmd_ctl(args: argparse.Namespace) -> int:
    from hoodied.ctl import main_ctl

    return main_ctl(
        args.config,
        args.command,
        args.table,
        service=args.service,
        instant=args.instant,
        reason=args.reason,
        by=args.by,
    )


def _cmd_history(args: argparse.Namespace) -> int:
    from hoodied.ctl import main_history

    return main_history(args.config, args.table, limit=args.limit, as_json=args.json)


def _cmd_demo(args: argparse.Namespace) -> int:
    from hoodied.demo import DemoOptions, run_demo

    return run_demo(
        DemoOptions(
            path=args.path,
            duration=args.duration,
            port=args.port,
            interval=args.interval,
            batch_rows=args.batch_rows,
            drain_timeout=args.drain_timeout,
        )
    )


def _add_instant_option(p: argparse.ArgumentParser, service: str) -> None:
    p.add_argument("--instant", help=f"the pending {service} to execute (default: the earliest)")
    p.add_argument(
        "--take-over",
        action="store_true",
        help=f"run an inflight {service} whose owner may be alive: wait for its heartbeat to expire (a live "
        "run's never does: stop its owner first), then roll it back and run it (without this flag an "
        "inflight instant hoodied did not start is refused unless its heartbeat expired, and a fresh "
        "heartbeat always is)",
    )


def _add_storage_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="an option of the table's store (S3: endpoint, region, access_key_id...; the store's "
        "environment variables apply too)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hoodied", description="Table services for Apache Hudi tables.")
    parser.add_argument("--version", action="version", version=f"hoodied {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the daemon: keep the configured tables maintained")
    p.add_argument("--config", required=True, help="the daemon's YAML configuration")
    p.add_argument(
        "--once",
        action="store_true",
        help="one poll, run what it found, then exit (1 when a table or a job failed)",
    )
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("status", help="pending instants, claim holders and last results of every table")
    p.add_argument("--config", required=True, help="the daemon's YAML configuration")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser(
        "ctl",
        help="steer the replicas without a restart: pause, resume, drain, trigger, cancel, retry",
        description="Write an operator command where every replica reads it within one poll "
        "(ZooKeeper, or the embedded state folder). pause: no new claims on the table; drain: finish "
        "running jobs, then paused; resume; trigger --service S: schedule S now, ignoring its trigger; "
        "cancel --service S --instant T: cancel T's Spark job group, T stays retryable (held until retry); "
        "retry --service S [--instant T]: forget the back-off of a given-up or cancelled instant.",
    )
    p.add_argument("command", help="pause, resume, drain, trigger, cancel or retry")
    p.add_argument("table", help="the table's name in the configuration (as hoodied status shows it)")
    p.add_argument("--config", required=True, help="the daemon's YAML configuration")
    p.add_argument("--service", help="the table service (trigger, cancel, retry)")
    p.add_argument("--instant", help="the instant (cancel; retry: default every instant of the service)")
    p.add_argument("--reason", default="", help="why: kept in the logs and the table's history")
    p.add_argument("--by", help="who gives the command (default: user@host)")
    p.set_defaults(func=_cmd_ctl)

    p = sub.add_parser("history", help="what hoodied did to each table: jobs and operator commands")
    p.add_argument("table", nargs="?", help="one table's name (default: every table)")
    p.add_argument("--config", required=True, help="the daemon's YAML configuration")
    p.add_argument("--limit", type=int, default=20, help="records per table (newest first; default 20)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_history)

    p = sub.add_parser("read", help="query a table and write the result to a Parquet file")
    p.add_argument("path", help="table base path or URI")
    p.add_argument("--out", required=True, help="Parquet file to write")
    p.add_argument("--as-of", dest="as_of", help="time travel to this instant time")
    p.add_argument("--read-optimized", action="store_true", help="base files only (MOR tables)")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_read)

    p = sub.add_parser("timeline", help="print the instants of the active timeline")
    p.add_argument("path")
    p.add_argument("--archived", action="store_true", help="the archived history too, oldest first")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_timeline)

    p = sub.add_parser("fsview", help="print file groups and their slices")
    p.add_argument("path")
    p.add_argument("--as-of", dest="as_of")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_fsview)

    p = sub.add_parser("generate", help="create a table of generated trips (deterministic for a seed)")
    p.add_argument("path", help="where the new table goes (a folder, or s3://, gs://, abfss:// ...)")
    p.add_argument(
        "--table-type", choices=["cow", "mor"], default="mor", help="copy-on-write or merge-on-read (mor)"
    )
    p.add_argument(
        "--table-version", type=int, choices=[6, 8, 9], default=8, help="Hudi table version (default 8)"
    )
    p.add_argument("--rows", type=int, default=1000, help="rows per commit")
    p.add_argument("--commits", type=int, default=3, help="commits written: an insert, then upserts")
    p.add_argument("--update-fraction", type=float, default=0.2, help="of the live records, per later commit")
    p.add_argument(
        "--delete-fraction", type=float, default=0.05, help="of the live records, per later commit"
    )
    p.add_argument("--partitions", type=int, default=4, help="0 for an unpartitioned table")
    p.add_argument(
        "--log-format", choices=["avro", "parquet"], default="avro", help="data blocks of MOR log files"
    )
    p.add_argument("--seed", type=int, default=0, help="same seed, same table (file ids, rows, keys)")
    p.add_argument("--name", default="trips", help="table name")
    p.add_argument(
        "--operation",
        choices=["upsert", "insert", "bulk_insert"],
        default="upsert",
        help="Hudi write operation of the batches; insert and bulk_insert store an updated key once more "
        "(tables that repeat record keys)",
    )
    _add_storage_option(p)
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser("compact", help="schedule and/or run MOR compaction (as Hudi's HoodieCompactor)")
    p.add_argument("path")
    p.add_argument("--mode", choices=["schedule", "execute", "schedule-and-execute"], required=True)
    _add_instant_option(p, "compaction")
    p.add_argument("--strategy", help="plan strategy, e.g. LogFileSizeBased (Hudi's class names too)")
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: local[*] in-process)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* or spark.* setting")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_compact)

    p = sub.add_parser("clean", help="schedule and/or run a clean (as Hudi's HoodieCleaner)")
    p.add_argument("path")
    p.add_argument(
        "--mode", choices=["schedule", "execute", "schedule-and-execute"], default="schedule-and-execute"
    )
    _add_instant_option(p, "clean")
    p.add_argument("--policy", help="KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS or KEEP_LATEST_BY_HOURS")
    p.add_argument(
        "--spark",
        action="store_true",
        help="start Spark to delete large plans in parallel (small plans use threads either way)",
    )
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: local[*] in-process)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* or spark.* setting")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser("cluster", help="schedule and/or run clustering (as Hudi's HoodieClusteringJob)")
    p.add_argument("path")
    p.add_argument("--mode", choices=["schedule", "execute", "schedule-and-execute"], required=True)
    _add_instant_option(p, "clustering")
    p.add_argument("--sort-columns", help="comma-separated columns the new files are sorted by")
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: local[*] in-process)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* or spark.* setting")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_cluster)

    p = sub.add_parser("index", help="build or drop metadata-table indexes (as Hudi's HoodieIndexer)")
    p.add_argument("path")
    p.add_argument("--mode", choices=list(INDEX_MODES), required=True)
    p.add_argument(
        "--index-types",
        help="comma-separated: column_stats, bloom_filters, record_index, partition_stats (files: dropindex)",
    )
    _add_instant_option(p, "indexing")
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: local[*] in-process)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* or spark.* setting")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_index)

    _add_service_command(
        sub,
        "logcompact",
        "logcompaction",
        "merge a MOR slice's log blocks into one log file (log compaction)",
    )
    _add_service_command(sub, "ttl", "ttl", "delete partitions past their TTL (Hudi's partition TTL)")

    p = sub.add_parser("savepoint", help="create, delete or list savepoints (as Hudi's savepoint commands)")
    p.add_argument("action", choices=["create", "delete", "list"])
    p.add_argument("path")
    p.add_argument("instant", nargs="?", help="the completed commit to savepoint (create), or the savepoint")
    p.add_argument("--user", help="who savepointed (default: the OS user)")
    p.add_argument("--comments", help="a note kept with the savepoint")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* setting (locks)")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_savepoint)

    p = sub.add_parser("restore", help="roll the table back to a savepoint (as Hudi's restore)")
    p.add_argument("path")
    p.add_argument("instant", help="the savepoint to restore to")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* setting")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_restore)

    p = sub.add_parser("archive", help="move old instants into the table's history (as Hudi's archiver)")
    p.add_argument("path")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="hoodie.* setting")
    _add_storage_option(p)
    p.set_defaults(func=_cmd_archive)

    p = sub.add_parser(
        "demo", help="a live MOR table, a writer and the daemon compacting, clustering and cleaning it"
    )
    p.add_argument("--path", default="./hoodied-demo", help="the demo table's folder")
    p.add_argument("--duration", type=float, default=120.0, help="seconds before it stops by itself")
    p.add_argument("--port", type=int, default=9464, help="metrics port on 127.0.0.1; 0: a free one")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between the writer's batches")
    p.add_argument("--batch-rows", type=int, default=300, help="rows per batch (updates and new rows)")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="seconds to finish pending table services once the writer stopped",
    )
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with contextlib.ExitStack() as cleanup:  # sessions a command opens (a ZooKeeper lock's)
            args.cleanup = cleanup
            code: int = args.func(args)
            sys.stdout.flush()  # here, where a reader that left (``| head -1``) is told apart below
        return code
    except HoodieError as e:
        print(f"hoodied: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError as e:
        if _reader_left():
            return 0  # the reader of the output had enough (``| head``): not an error of the command
        print(f"hoodied: error: {e}", file=sys.stderr)  # a connection's, not the output's
        return 1
    except (OSError, ValueError) as e:
        print(f"hoodied: error: {e}", file=sys.stderr)
        return 1


def _reader_left() -> bool:
    """Whether standard output is a pipe whose reader closed it (the kernel then flags its write end with an
    error); if so it is pointed at ``/dev/null``, so that flushing it as the interpreter exits raises
    nothing."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poller.poll(0)):
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return True


if __name__ == "__main__":
    sys.exit(main())
