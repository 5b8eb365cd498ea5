"""Task functions for the rollback-race test, shipped to Spark's Python workers by value (the workers cannot
import the tests): one task fails, another writes a base file of the instant late, as a slow task would."""

from __future__ import annotations

import time
from dataclasses import dataclass

from hoodie.file_group.base_file import BaseFile
from hoodie.storage import Storage
from hoodie.write.markers import Markers


@dataclass(frozen=True)
class StragglerTask:
    base_uri: str
    instant_time: str
    partition: str
    file_id: str
    role: str  # "fail" | "slow"


def run(task: StragglerTask, write_token: str) -> int:
    if task.role == "fail":
        time.sleep(0.3)
        raise RuntimeError("this task fails on purpose")
    time.sleep(1.0)  # after the failure: the job is over, but this task still runs
    storage = Storage.for_uri(task.base_uri)
    name = BaseFile(task.file_id, "0-0-99", task.instant_time, "parquet").file_name
    Markers(storage, task.instant_time).create(task.partition, name, "CREATE")
    storage.create(f"{task.partition}/{name}" if task.partition else name, b"PAR1 a straggler's file")
    time.sleep(30)  # keeps running until Spark kills it
    return 0
