"""A Spark standalone cluster on 127.0.0.1 for tests: a Master and Workers, each its own JVM started with
pyspark's own ``spark-class``, and an executor Python that has hoodied's dependencies but not hoodied itself
(so a job only runs when its code is shipped).

The executor Python is a virtual environment whose ``.pth`` file names this interpreter's site-packages:
pyarrow, fastavro, numpy, obstore and pyspark import from there, while the ``.pth`` files inside them (the
editable install of ``hoodie``) are not read, because Python processes ``.pth`` files of its own site
directories only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from support.server_process import ServerProcess, free_port

SPARK_HOME = Path(pyspark.__file__).parent


def executor_python(folder: Path) -> Path:
    """A Python for executors without ``hoodie`` (see the module doc); returns its interpreter's path."""
    if not (folder / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(site, "driver-site-packages.pth").write_text("".join(f"{p}\n" for p in ours))
    probe = subprocess.run(
        [str(python), "-c", "import pyarrow, fastavro, pyspark, obstore\nimport hoodie"],
        capture_output=True,
        text=True,
        env=worker_environment(),
        cwd=str(folder),
    )
    if "No module named 'hoodie'" not in probe.stderr:
        raise RuntimeError(f"the executor Python must lack hoodie and have its dependencies: {probe.stderr}")
    return python


def worker_environment() -> dict[str, str]:
    """The environment of the cluster's JVMs: no PYTHONPATH (so executors see no checkout), no store
    credentials (what executors reach storage with must come with the tasks), loopback only."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
        and not k.startswith(("AWS_", "AZURE_", "GOOGLE_", "HOODIE"))
    }
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    return env


@dataclass
class StandaloneCluster:
    """A Master and ``workers`` Workers of ``cores`` cores and ``memory`` each, in ``folder``."""

    folder: Path
    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    processes: list[ServerProcess] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self) -> StandaloneCluster:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise RuntimeError("a Spark cluster needs Java")
        self.folder.mkdir(parents=True, exist_ok=True)
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        env = worker_environment()
        master = ServerProcess(
            "spark master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.web_port),
            ],
            self.folder / "master.log",
            lambda: self.alive_workers() >= 0,
            env=env,
        )
        master.start()
        self.processes.append(master)
        for i in range(self.workers):
            work_dir = self.folder / f"worker-{i}"
            work_dir.mkdir(exist_ok=True)
            worker = ServerProcess(
                f"spark worker {i}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(work_dir),
                    self.master_url,
                ],
                self.folder / f"worker-{i}.log",
                lambda n=i + 1: self.alive_workers() >= n,
                env=env,
            )
            worker.start()
            self.processes.append(worker)
        return self

    def alive_workers(self) -> int:
        """Workers the Master lists as ALIVE (-1 while the Master does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=2) as r:
                state = json.load(r)
        except OSError:
            return -1
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    @staticmethod
    def python_workers(python: Path) -> list[int]:
        """PIDs of the Python processes of executors running ``python`` (Spark's ``pyspark.daemon`` and the
        workers it forks) now alive."""
        out = subprocess.run(["pgrep", "-f", f"^{python} -m pyspark"], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        for p in reversed(self.processes):
            p.stop()
        self.processes.clear()


__all__ = ["SPARK_HOME", "StandaloneCluster", "executor_python", "worker_environment"]
