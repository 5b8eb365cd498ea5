"""A test server run as a child process in its own process group: started, waited for until it answers,
stopped by killing its group, its output in a log file beside its data."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

START_TIMEOUT_SECONDS = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
