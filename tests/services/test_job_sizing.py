"""Jobs sized from their plans: the task memory estimate, CPUs a task where executors' Python memory is
bounded, the driver for small plans, and the size in a job's name."""

from __future__ import annotations

import pytest

from hoodied.job_sizing import (
    ExecutorShape,
    MiB,
    SizingSettings,
    memory_warning,
    parse_size,
    size_job,
)


def test_sizes_parse_as_spark_and_kubernetes_write_them() -> None:
    assert parse_size("512m") == 512 * MiB
    assert parse_size("8MiB") == 8 * MiB
    assert parse_size("2g") == 2048 * MiB
    assert parse_size("1.5k") == 1536
    assert parse_size(7) == 7
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_executor_shape_comes_from_the_session_settings() -> None:
    conf = {"spark.executor.cores": "4", "spark.executor.pyspark.memory": "8g"}
    assert ExecutorShape.from_conf(conf, "spark://h:7077") == ExecutorShape(4, 8192 * MiB)
    assert ExecutorShape.from_conf(conf, "local[2]") is None
    assert ExecutorShape.from_conf({}, "k8s://https://k") == ExecutorShape(1, None)
    # hoodied's own figure (sizing only) wins over Spark's enforced limit.
    assert ExecutorShape.from_conf(conf, "spark://h:7077", 6144 * MiB) == ExecutorShape(4, 6144 * MiB)


def test_tasks_take_more_cpus_when_their_memory_would_not_fit_side_by_side() -> None:
    settings = SizingSettings(arrow_expansion=4.0, memory_factor=3.0, max_task_cpus=4)
    executor = ExecutorShape(cores=4, python_memory=8192 * MiB)
    # 100 MiB of plan bytes -> 1.2 GiB a task: six fit in 8 GiB, so four run side by side on one CPU each.
    small = size_job([100 * MiB, 50 * MiB], 2, settings, executor)
    assert small.task_memory == 1200 * MiB
    assert small.task_cpus == 1
    # 400 MiB -> 4.7 GiB a task: one fits, so each task takes all four CPUs.
    big = size_job([400 * MiB, 10 * MiB], 2, settings, executor)
    assert big.task_cpus == 4
    # 250 MiB -> 2.9 GiB: two fit, two CPUs each; capped by max_task_cpus.
    assert size_job([250 * MiB], 1, settings, executor).task_cpus == 2
    assert size_job([400 * MiB], 1, SizingSettings(max_task_cpus=2), executor).task_cpus == 2
    # Without a Python memory limit, or without plan bytes, one CPU a task.
    assert size_job([400 * MiB], 1, settings, ExecutorShape(4, None)).task_cpus == 1
    assert size_job([], 3, settings, executor).task_cpus == 1


def test_small_plans_run_in_the_driver_when_configured() -> None:
    on = SizingSettings(driver_max_bytes=8 * MiB)
    assert size_job([1 * MiB, 2 * MiB], 2, on, None).in_driver
    assert not size_job([1 * MiB, 8 * MiB], 2, on, None).in_driver
    assert not size_job([], 2, on, None).in_driver  # unknown bytes: not small
    assert not size_job([1], 1, SizingSettings(), None).in_driver  # off by default


def test_the_size_reads_in_a_job_name() -> None:
    size = size_job([3 * MiB, 1 * MiB], 2, SizingSettings(), ExecutorShape(2, 1024 * MiB))
    assert size.describe() == "2 task(s), 4.0 MiB in (largest 3.0 MiB)"
    assert size_job([], 5, SizingSettings(), None).describe() == "5 task(s)"
    with pytest.raises(ValueError, match="max_task_cpus"):
        SizingSettings(max_task_cpus=0)


def test_a_task_too_big_for_its_executor_is_named() -> None:
    executor = ExecutorShape(cores=2, python_memory=1024 * MiB)
    big = size_job([200 * MiB], 1, SizingSettings(), executor)
    assert big.task_cpus == 2  # alone on its executor, and still too big:
    warning = memory_warning(big, executor)
    assert warning is not None
    assert "2.3 GiB, more than the executors' Python memory (1.0 GiB)" in warning
    assert memory_warning(size_job([10 * MiB], 1, SizingSettings(), executor), executor) is None
    assert memory_warning(big, None) is None
