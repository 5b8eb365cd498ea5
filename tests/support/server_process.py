"""A test server run as a child process in its own process group: started, waited for until it answers,
stopped by killing its group, its output in a log file beside its data."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

START_TIMEOUT_SECONDS = 60.0


#: The ports :func:`free_port` hands out: below Linux's ephemeral range (32768-60999), so that no client
#: socket is given one between its choice and the server's bind, split among pytest-xdist's workers so that
#: two workers never pick the same one.
PORTS = range(20000, 32000)
_handed_out: set[int] = set()


def _worker_ports() -> range:
    """This pytest-xdist worker's share of :data:`PORTS` (all of them outside xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    span = len(PORTS) // max(1, count)
    start = PORTS.start + (index % max(1, count)) * span
    return range(start, start + span)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, from this worker's share of :data:`PORTS`,
    never the same twice in one process."""
    ports = _worker_ports()
    for port in random.sample(ports, len(ports)):
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


class ServerProcess:
    """One server; :meth:`start` waits until ``ready()`` is true, :meth:`stop` kills it by its PID."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        log: Path,
        ready: Callable[[], bool],
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.env = dict(env) if env is not None else None
        self.command = list(command)
        self.log = log
        self._ready = ready
        self._process: subprocess.Popen[bytes] | None = None
        self._out: BinaryIO | None = None

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        self._out = self.log.open("wb")
        self._process = subprocess.Popen(
            self.command, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True, env=self.env
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self.stop()
                raise RuntimeError(f"{self.name} exited: {self.log.read_text(errors='replace')[-2000:]}")
            if self._ready():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        if self._out is not None:
            self._out.close()
            self._out = None


__all__ = ["ServerProcess", "free_port"]
