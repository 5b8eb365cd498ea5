"""The one job runner for every table service: :func:`run_service_job` prepares a pending instant
(:meth:`~hoodie.table_service.TableService.prepare`), runs its tasks as a Spark job (one Spark task per unit
of work, Hudi-style write tokens) or on threads in the driver (jobs too small for executors, or no Spark at
hand), and commits it; a failed task gets a readable reason.

A job runs in the job group ``hoodied-<action>-<instant>`` so that it can be cancelled as a whole (a lost
claim, a shutdown), and is named ``hoodied <action> <table> <instant>: <size>`` in the Spark UI and event log.
Its size (tasks, plan bytes, CPUs a task) and whether it runs on executors at all follow
:mod:`hoodied.job_sizing`. Every task first checks that its executor runs the driver's code
(:mod:`hoodied.executor_code`).

Each task's write token is ``<partition id>-<attempt number>-<task attempt id>``: Hudi's form with the run's
random attempt number where Spark's stage id would be (:mod:`hoodie.write.attempt`), so a retried or
speculative task attempt writes files of its own (the driver deletes them before it commits), and so does
every other run of the same instant, in any process: no two runs ever write a file of the same name.

**The lease.** A run holds its instant's lease from before it touches the instant until it ends: Hudi's
heartbeat file ``.hoodie/.heartbeat/<instant>``, beaten every ``hoodie.client.heartbeat.interval_in_ms``,
taken and beaten by compare-and-set (:class:`~hoodie.write.heartbeat.InstantLease`). It makes the run visible
to every other executor whatever its claims (another daemon, a one-off command, a second name of the table):
an instant whose lease is fresh is left alone (:class:`~hoodied.errors.ForeignInstant`, naming the holder),
never rolled back. The run's fence is its claim *and* its lease, re-read under the table lock before any
rollback and before the commit; a run that lost either (a pause past the expiry, a takeover) commits nothing
and deletes only files its own attempt wrote.

When a task fails, Spark ends the job at once while the other tasks of the attempt may still be running (a
killed Python worker dies up to ``spark.python.task.killTimeout`` later): rolling back then would race them,
and a file they write after the rollback would be left behind. So a failed job's group is cancelled and
:func:`wait_for_group` waits until none of its tasks runs any more, up to :data:`TASK_STOP_TIMEOUT` seconds;
only then is the attempt rolled back. Tasks that do not stop in time leave the instant inflight (nothing is
rolled back under their feet): its next runner rolls it back once they are gone.

An operator's cancel stops the job's Spark tasks (its group is cancelled), but Spark cancels only active
jobs: a job that ran on the driver's threads, or whose last Spark job ended before the cancel came, would
commit all the same. So the job asks ``cancelled`` once its tasks are done, right before it commits; a
cancelled job is rolled back to requested instead (:class:`~hoodied.errors.JobCancelled`). A cancel that
arrives once the commit began comes too late: the commit is atomic and completes.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark import TaskContext
from pyspark.resource import ResourceProfile, ResourceProfileBuilder, TaskResourceRequests

from hoodie.errors import CommitConflict, HoodieError, LeaseHeld, LeaseLost, LostRace
from hoodie.lease_margin import check_store_fits_lease, is_object_store, request_deadline_ms
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import Done, Fence, ServiceJob, TableService
from hoodie.timeline.instant import Instant, State
from hoodie.write.attempt import Attempt, AttemptFence
from hoodie.write.heartbeat import HeartbeatConfig, InstantLease
from hoodie.write.late_files import LateFiles
from hoodie.write.rollback import discard_attempt_files, rollback_unfinished
from hoodied.errors import (
    CORRUPT_DATA_ERRORS,
    ClaimLost,
    CorruptData,
    ForeignInstant,
    JobCancelled,
    JobFailed,
)
from hoodied.executor_code import CodeStamp, check_code, code_stamp
from hoodied.job_sizing import ExecutorShape, JobSize, SizingSettings, memory_warning, size_job
from hoodied.ownership import NEVER, decide, forget_start, read_start, record_start

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")

#: Seconds a failed job's other tasks get to stop before its rollback is given up.
TASK_STOP_TIMEOUT = 120.0

#: Threads for the tasks of a job that runs in the driver.
DRIVER_THREADS = 8


@dataclass(frozen=True)
class JobRun:
    """A completed run of one service's instant."""

    done: Done
    seconds: float
    tasks: int
    on_executors: bool  # the tasks ran as a Spark job (not on the driver's threads)
    rolled_back_files: int  # files of an abandoned earlier attempt rolled back first
    size: JobSize


def run_service_job(
    spark: SparkSession | None,
    service: TableService,
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    settings: Mapping[str, str] | None = None,
    fence: Fence | None = None,
    table: Table | None = None,
    sizing: SizingSettings | None = None,
    replica: str = "hoodied",
    foreign_after: float = NEVER,
    cancelled: Callable[[], str | None] | None = None,
    late_files: Callable[[LateFiles], None] | None = None,
) -> JobRun:
    """Run ``service``'s pending instant at ``instant_time`` (default: the earliest) and commit it.

    The caller holds the instant's claim (``fence`` re-checks it before any rollback and the commit).
    ``settings`` are the table's properties overlaid with the operator's (default: the table's own);
    ``table`` a view read after the claim was taken (saves the prepare step a load). Without ``spark``,
    or for a job that is small (its service says so, or ``sizing`` does), the tasks run on threads in the
    driver.

    The run takes the instant's lease (module doc) and records itself as the instant's starter
    (``replica``) before it moves the instant to inflight; an instant whose lease another run holds, or an
    inflight instant that hoodied did not start and that the rule of :mod:`hoodied.ownership` does not let
    it take over (``foreign_after``: the table's ``takeover_foreign_after``), raises
    :class:`~hoodied.errors.ForeignInstant` and nothing is touched. A run that lost its claim or lease, or
    found its instant completed by another, raises :class:`~hoodie.errors.LostRace` (or the claim's
    :class:`~hoodied.errors.ClaimLost`) having deleted only files of its own attempt.

    ``cancelled`` says who cancelled the job and why (``by <who> (<reason>)``; None: nobody); it is asked
    when the tasks are done, and a cancelled job is rolled back instead of committed (see the module doc).

    ``late_files`` is told, however the run ends, where the attempts it took the instant over from (voided)
    may still land files, for the caller to sweep later (:mod:`hoodie.write.late_files`).
    """
    started = time.monotonic()
    settings = settings or {}
    attempt = Attempt.new()
    job, lease, fence = _prepare(
        service,
        storage,
        lock,
        instant_time,
        settings,
        table,
        replica,
        foreign_after,
        fence,
        attempt,
        late_files,
    )
    try:
        sizing = sizing or SizingSettings()
        executor = None
        if spark is not None:
            sc = spark.sparkContext
            conf = dict(sc.getConf().getAll())
            executor = ExecutorShape.from_conf(conf, sc.master or "local", sizing.executor_python_memory)
        size = size_job(job.task_bytes, len(job.tasks), sizing, executor)
        on_executors = spark is not None and not job.in_driver and not size.in_driver and bool(job.tasks)
        T = job.instant.time
        table_name = job.table_name or storage.uri.rstrip("/").rsplit("/", 1)[-1]
        warning = memory_warning(size, executor) if on_executors else None
        if warning:
            logger.warning("%s %s of %s: %s", job.service, T, storage.uri, warning)
        group = job_group(job.service, T)
        if lease is not None and spark is not None:
            context = spark.sparkContext
            lease.on_lost(lambda why: context.cancelJobGroup(group))
        try:
            if on_executors:
                assert spark is not None
                results = run_tasks(
                    spark,
                    group,
                    f"hoodied {job.service} {table_name} {T}: {size.describe()}",
                    job.tasks,
                    partial(_run_task, job.run_task, code_stamp(), attempt),
                    task_cpus=size.task_cpus,
                )
            else:
                results = _run_in_driver(job, attempt)
        except Exception as e:  # Py4JJavaError carries the Python traceback of the failed task
            _failed(e, spark if on_executors else None, storage, lock, job, fence, attempt)
        why = cancelled() if cancelled is not None else None
        if why is not None:
            _abandon(job, storage, lock, fence, attempt, JobCancelled, f"cancelled {why} before its commit")
        try:
            done = job.commit(results, fence)
        except (ClaimLost, LeaseLost, LostRace):
            # Not ours to complete any more (voided by a takeover, too): what this attempt wrote goes (nobody
            # else's, and no completion names it), the rest stays.
            if job.rollback_groups is not None:
                discard_attempt_files(storage, T, job.rollback_groups, attempt.number)
            raise
        forget_start(storage, job.service, done.instant.time)
    finally:
        if lease is not None:
            # A job whose tasks write nothing (no rollback groups) has no late files.
            _tell_late_files(late_files, job.instant.time, lease, job.rollback_groups or ())
            lease.release()
    seconds = time.monotonic() - started
    return JobRun(done, seconds, len(job.tasks), on_executors, job.rolled_back_files, size)


def _tell_late_files(
    sink: Callable[[LateFiles], None] | None,
    instant_time: str,
    lease: InstantLease,
    groups: Sequence[tuple[str, str | None]] | None,
) -> None:
    """Tell ``sink`` where the attempts ``lease`` was taken over from may land files (``groups``: those the
    job writes; ``None``: every partition), when it was taken over from any."""
    superseded = lease.superseded
    if sink is not None and superseded and groups != ():
        sink(LateFiles(instant_time, tuple(groups) if groups is not None else None, superseded))


def _prepare(
    service: TableService,
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None,
    settings: Mapping[str, str],
    table: Table | None,
    replica: str,
    foreign_after: float,
    claim_fence: Fence | None,
    attempt: Attempt,
    late_files: Callable[[LateFiles], None] | None,
) -> tuple[ServiceJob[Any, Any], InstantLease | None, Fence]:
    """The service's prepare step, with the instant's lease taken and its start recorded first (see
    :func:`run_service_job`). Returns the job, the lease this run holds (``None`` when nothing was pending)
    and the run's fence: the caller's claim (``claim_fence``) and the lease, re-read."""
    view = table or Table.load(storage)
    pending = service.pending(view)
    instant = next((i for i in pending if instant_time in (None, i.time)), None)
    if instant is None:  # nothing pending: the service's prepare says so in its own words
        return service.prepare(storage, lock, instant_time, settings, view), None, claim_fence or _no_fence
    where = f"{service.name} {instant.time} of {storage.uri}"
    if instant.state is State.INFLIGHT:
        verdict = decide(view, service.name, instant, settings, foreign_after)
        if not verdict.allowed:
            raise ForeignInstant(f"{where} is inflight: {verdict.reason}")
        if verdict.foreign:
            logger.warning("taking over %s: %s", where, verdict.reason)
    lease = InstantLease(
        storage, instant.time, HeartbeatConfig.from_config(settings), replica=replica, attempt=attempt.id
    )

    deadline_ms = _request_deadline_ms(storage, settings)

    def check() -> None:
        if claim_fence is not None:
            claim_fence()
        lease.check(reread=True)
        lease.ensure_margin(deadline_ms)

    # The attempt's number decides its completion, and the attempts the lease was taken over from are voided
    # before any rollback of theirs (hoodie.write.decision).
    fence = AttemptFence(check, attempt.number, lambda: lease.superseded)

    try:
        lease.take()
    except LeaseHeld as e:
        raise ForeignInstant(f"{where} is being run elsewhere: {e}") from e
    try:
        # The start record as of taking the lease: the record is written conditional on it (a run that
        # paused after this and lost the instant cannot overwrite the next holder's record).
        seen = read_start(storage, service.name, instant.time)
        fence()  # a run whose claim lapsed while it read must not record itself over the new holder's start
        record_start(storage, service.name, instant.time, replica, attempt.id, seen=seen)
        try:
            return service.prepare(storage, lock, instant.time, settings, view, fence=fence), lease, fence
        except Exception as e:
            if isinstance(e, CommitConflict) or not _inflight(storage, instant):
                # Another process started it, or nobody did: this attempt's record goes (not theirs).
                forget_start(storage, service.name, instant.time, attempt.id)
            raise
    except BaseException:
        # Prepared no job (a conflict removed the instant, say): the earlier attempts may have written in
        # any partition, looked up when swept (a store error now must not lose the sweep: chaos seed 773).
        _tell_late_files(late_files, instant.time, lease, None)
        lease.release()
        raise


def _request_deadline_ms(storage: Storage, settings: Mapping[str, str]) -> int:
    """How long one request to the table's store may take (:mod:`hoodie.lease_margin`): every fenced write
    must fit in what is left of the instant lease. The bound is that of the options fitted to the table's
    leases (the daemon's configuration and the one-off commands open the store with those; a library caller
    that opens it otherwise is held to the same bound). 0 on local disk: no request deadline of its own."""
    if not is_object_store(storage.uri):
        return 0
    return request_deadline_ms(check_store_fits_lease(storage.uri, storage.options, settings).options)


def _no_fence() -> None:
    """The fence of a run that holds nothing (nothing was pending: its prepare raises before any write)."""


def _inflight(storage: Storage, instant: Instant) -> bool:
    try:
        now = Table.load(storage).timeline.get(instant.time)
    except Exception:  # unreadable now: keep the record (it may be ours)
        return True
    return now is not None and now.state is State.INFLIGHT


def _run_task(run_task: Callable[[Any, str], _R], code: CodeStamp, attempt: Attempt, task: Any) -> _R:
    """An executor's side of a task: the code check, then the service's ``run_task`` with the task
    attempt's write token."""
    check_code(code)
    return run_task(task, write_token(attempt, getattr(task, "index", 0)))


def _run_in_driver(job: ServiceJob[Any, _R], attempt: Attempt) -> list[_R]:
    tokens = [attempt.write_token(i) for i in range(len(job.tasks))]
    if len(job.tasks) <= 1:
        return [job.run_task(t, token) for t, token in zip(job.tasks, tokens, strict=True)]
    with ThreadPoolExecutor(max_workers=min(DRIVER_THREADS, len(job.tasks))) as pool:
        return list(pool.map(job.run_task, job.tasks, tokens))


def _failed(
    e: Exception,
    spark: SparkSession | None,
    storage: Storage,
    lock: LockProvider,
    job: ServiceJob[Any, Any],
    fence: Fence,
    attempt: Attempt,
) -> None:
    """A task failed: raise why, after rolling the attempt back when its tasks write files (then the
    instant goes back to requested). Jobs whose tasks write nothing stay pending as they are."""
    T = job.instant.time
    what = f"{job.service} {T} of {storage.uri}"
    reason = task_error(e)
    error = CorruptData if is_corrupt_data(e) else JobFailed
    logger.error("%s failed in a task: %s", what, reason)
    if (
        job.rollback_groups is not None  # only a rollback needs the other tasks stopped first
        and spark is not None
        and not wait_for_group(spark, job_group(job.service, T), TASK_STOP_TIMEOUT)
    ):
        raise JobFailed(
            f"{what} failed ({reason}); some of its tasks did not stop within {TASK_STOP_TIMEOUT:.0f} s, so "
            "it is left inflight for its next runner to roll back"
        ) from e
    _abandon(job, storage, lock, fence, attempt, error, f"failed: {reason}", cause=e)


def _abandon(
    job: ServiceJob[Any, Any],
    storage: Storage,
    lock: LockProvider,
    fence: Fence,
    attempt: Attempt,
    error: type[JobFailed],
    why: str,
    cause: BaseException | None = None,
) -> None:
    """Drop a job whose tasks no longer run, raising ``error`` (from ``cause``): its attempt is rolled back
    when its tasks write files (the instant goes back to requested); jobs whose tasks write nothing stay
    pending as they are. A run that lost its claim or lease (the fence, checked again under the lock by the
    rollback) rolls nothing back: it deletes only the files its own attempt wrote and raises the loss."""
    T = job.instant.time
    what = f"{job.service} {T} of {storage.uri}"
    if job.rollback_groups is None:
        raise error(f"{what} {why} (stays pending, re-runnable)") from cause
    try:
        fence()
        rollback_unfinished(storage, lock, job.instant, job.rollback_groups, fence=fence)
    except (ClaimLost, LeaseLost) as lost:
        discarded = discard_attempt_files(storage, T, job.rollback_groups, attempt.number)
        raise LostRace(
            f"{what} {why}; it no longer holds the instant ({lost}), so nothing of it was rolled back "
            f"(only its own attempt's {len(discarded)} file(s) were deleted)"
        ) from cause
    forget_start(
        storage, job.service, T, attempt.id
    )  # requested again: whoever starts it next records itself
    raise error(f"{what} {why} (rolled back to requested)") from cause


def job_group(action: str, instant_time: str) -> str:
    return f"hoodied-{action}-{instant_time}"


def write_token(attempt: Attempt, fallback_index: int) -> str:
    """The running Spark task attempt's write token in ``attempt`` (module doc; task ``fallback_index``'s
    first attempt outside Spark)."""
    ctx = TaskContext.get()
    if ctx is None:
        return attempt.write_token(fallback_index)
    return attempt.write_token(ctx.partitionId(), ctx.taskAttemptId())


def run_tasks(
    spark: SparkSession,
    group: str,
    description: str,
    tasks: Sequence[_T],
    fn: Callable[[_T], _R],
    *,
    task_cpus: int = 1,
) -> list[_R]:
    """Run ``fn`` on every task, one Spark task each, in job group ``group`` named ``description``, each
    task taking ``task_cpus`` CPUs (a stage-level profile; local mode ignores it); returns the results in
    task order. A failed task raises whatever Spark raised (see :func:`task_error`)."""
    if not tasks:
        return []
    sc = spark.sparkContext
    sc.setJobGroup(group, description, interruptOnCancel=True)
    try:
        rdd = sc.parallelize(list(tasks), len(tasks))
        if task_cpus > 1 and not (sc.master or "local").startswith("local"):
            rdd = rdd.withResources(_task_profile(task_cpus))
        return rdd.map(fn).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def _task_profile(cpus: int) -> ResourceProfile:
    """A task resource profile of ``cpus`` CPUs on the session's default executors."""
    return ResourceProfileBuilder().require(TaskResourceRequests().cpus(cpus)).build


def wait_for_group(spark: SparkSession, group: str, timeout: float, poll: float = 0.1) -> bool:
    """Cancel job group ``group`` and wait until none of its tasks runs (True), or ``timeout`` seconds
    passed (False)."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
    if any(j is not None and j.status == "RUNNING" for j in jobs):
        sc.cancelJobGroup(group)
    deadline = time.monotonic() + timeout
    while True:
        running = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                running += stage.numActiveTasks if stage is not None else 0
            running += job.status == "RUNNING"
        if not running:
            return True
        if time.monotonic() >= deadline:
            logger.error("job group %s: tasks still running %.0f s after it was cancelled", group, timeout)
            return False
        time.sleep(poll)


def is_corrupt_data(e: BaseException) -> bool:
    """Whether a job failed because committed data is damaged: raised here, or named in a task's traceback
    (Spark hands the driver a task's Python error as text)."""
    if isinstance(e, CORRUPT_DATA_ERRORS):
        return True
    names = tuple(f"{cls.__module__}.{cls.__name__}" for cls in CORRUPT_DATA_ERRORS)
    return any(name in str(e) for name in names)


def task_error(e: BaseException) -> str:
    """The line of a failed job's error that says what went wrong.

    Spark hands the driver a failed task's Python traceback as text inside its own error (Py4J's); the line
    that matters is the exception line that ends the last traceback (``hoodie.errors.CorruptLogBlock: ...``).
    Without a traceback, the last line naming an error or exception, else the first line."""
    text = str(e)
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        for line in lines[starts[-1] + 1 :]:
            if line and not line[0].isspace():
                return _PYTHON_ERROR.sub(r"\1", line.strip())[:1000]
    for line in reversed(lines):
        line = line.strip()
        if line and ("Error" in line or "Exception" in line) and not line.startswith("at "):
            return line[:1000]
    if isinstance(e, HoodieError):
        return text
    return lines[0][:1000] if lines else type(e).__name__


#: A Python exception line as Spark quotes it: ``module.Name: message`` (the module path shortened away).
_PYTHON_ERROR = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*: .*)$")


__all__ = [
    "DRIVER_THREADS",
    "TASK_STOP_TIMEOUT",
    "JobRun",
    "is_corrupt_data",
    "job_group",
    "run_service_job",
    "run_tasks",
    "task_error",
    "wait_for_group",
    "write_token",
]
