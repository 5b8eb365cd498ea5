"""How big a job is and where it runs, from its plan: the rules :func:`hoodied.jobs.run_service_job` follows.

- **Tasks**: one Spark task per unit of the plan (a compaction operation, a log compaction operation, a
  clustering group, an indexing share, a batch of a clean), so the job's parallelism is the plan's.
- **Memory of a task**: a task holds about ``memory_factor`` times the Arrow size of its largest input slice
  (the bound compaction, clustering, log compaction and indexing keep), and Arrow data is about
  ``arrow_expansion`` times its compressed Parquet/Avro bytes; so ``task_memory = input bytes x expansion x
  factor``, from the plan's bytes (:func:`hoodie.table_service.plan_bytes`).
- **CPUs of a task**: Spark runs ``executor cores / spark.task.cpus`` tasks at once in an executor, and their
  Python workers share the executor's Python memory: ``executor_python_memory`` (for sizing only), else
  ``spark.executor.pyspark.memory`` (which Spark also enforces, as a limit on each worker's address space,
  that pyarrow's allocator and threads easily exceed: prefer the former, with the memory in
  ``spark.executor.memoryOverhead``). When that memory cannot hold that many tasks of the job's largest
  size, the job asks for more CPUs per task (a stage-level task resource profile, honoured by
  standalone, YARN and Kubernetes clusters; local mode has none) so that fewer run side by side, up to
  ``max_task_cpus`` and the executor's cores. Without a Python memory limit the executors' memory is not
  hoodied's to divide: one CPU per task.
- **In the driver**: a job whose plan reads at most ``driver_max_bytes`` in all runs on the driver's threads
  without a Spark round trip (measured in ``benchmarks/bench_job_sizing.py``: a Spark job costs a fixed
  latency per stage that small plans never win back). ``0`` turns it off.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MiB = 1024 * 1024
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": MiB, "g": 1024 * MiB, "t": 1024 * 1024 * MiB}


def parse_size(value: str | int) -> int:
    """Bytes from ``123``, ``64k``, ``512m``, ``2g``, ``8MiB`` (Spark's and Kubernetes' spellings; binary
    units)."""
    if isinstance(value, int):
        return value
    m = _SIZE.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a size (like 512m, 8MiB or 2g)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@dataclass(frozen=True)
class SizingSettings:
    """The caps and factors of the rules above (``spark.sizing`` in the daemon's config)."""

    driver_max_bytes: int = 0
    executor_python_memory: int = 0  # 0: spark.executor.pyspark.memory, if set
    arrow_expansion: float = 4.0
    memory_factor: float = 3.0
    max_task_cpus: int = 4

    def __post_init__(self) -> None:
        if (
            self.driver_max_bytes < 0
            or self.executor_python_memory < 0
            or self.arrow_expansion <= 0
            or self.memory_factor <= 0
        ):
            raise ValueError(f"sizing settings must be positive: {self}")
        if self.max_task_cpus < 1:
            raise ValueError(f"max_task_cpus must be at least 1: {self.max_task_cpus}")


@dataclass(frozen=True)
class ExecutorShape:
    """What one executor offers: cores, and the memory its Python workers share (``None``: no limit)."""

    cores: int
    python_memory: int | None

    @classmethod
    def from_conf(cls, conf: Mapping[str, str], master: str, python_memory: int = 0) -> ExecutorShape | None:
        """The executors of a session with ``conf`` on ``master`` (``None`` in local mode: no executors);
        ``python_memory`` (when not 0) wins over ``spark.executor.pyspark.memory``."""
        if master.startswith("local"):
            return None
        memory = conf.get("spark.executor.pyspark.memory")
        limit = python_memory or (parse_size(memory) if memory else None)
        return cls(int(conf.get("spark.executor.cores", "1")), limit)


@dataclass(frozen=True)
class JobSize:
    """A job's size and where it runs."""

    tasks: int
    input_bytes: int
    largest_task_bytes: int
    task_memory: int  # estimated peak memory of the largest task
    task_cpus: int
    in_driver: bool

    def describe(self) -> str:
        """For the job's name in the Spark UI and event log, and the logs."""
        text = f"{self.tasks} task(s)"
        if self.input_bytes:
            text += f", {_human(self.input_bytes)} in (largest {_human(self.largest_task_bytes)})"
        if self.task_cpus > 1:
            text += f", {self.task_cpus} CPUs a task"
        return text


def memory_warning(size: JobSize, executor: ExecutorShape | None) -> str | None:
    """Why the job's largest task may not fit its executor even alone (``None`` when it fits or nothing
    says): the hint to raise the executors' Python memory or plan smaller units."""
    if executor is None or not executor.python_memory or size.task_memory <= executor.python_memory:
        return None
    return (
        f"its largest task reads {_human(size.largest_task_bytes)} and may need about "
        f"{_human(size.task_memory)}, more than the executors' Python memory "
        f"({_human(executor.python_memory)}): raise it, or plan smaller file groups"
    )


def size_job(
    task_bytes: Sequence[int], tasks: int, settings: SizingSettings, executor: ExecutorShape | None
) -> JobSize:
    """Size a job of ``tasks`` tasks reading ``task_bytes`` each (empty: unknown) by the rules above."""
    known = len(task_bytes) == tasks and tasks > 0
    total = sum(task_bytes) if known else 0
    largest = max(task_bytes) if known else 0
    task_memory = int(largest * settings.arrow_expansion * settings.memory_factor)
    cpus = 1
    if executor is not None and executor.python_memory and task_memory:
        side_by_side = max(1, executor.python_memory // task_memory)
        cpus = min(math.ceil(executor.cores / side_by_side), settings.max_task_cpus, executor.cores)
    in_driver = known and total <= settings.driver_max_bytes
    return JobSize(tasks, total, largest, task_memory, max(1, cpus), in_driver)


def _human(n: int) -> str:
    for unit, size in (("GiB", 1024 * MiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


__all__ = ["ExecutorShape", "JobSize", "SizingSettings", "memory_warning", "parse_size", "size_job"]
