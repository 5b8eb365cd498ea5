"""Stop signals (SIGTERM, SIGINT) acted on from a thread of their own, never inside a signal handler.

A Python signal handler runs on the main thread between two of its bytecodes, so it may run while that thread
holds a lock. Inside ``threading.Event.wait`` the main thread holds the event's lock (a plain lock, not a
reentrant one) between its timed waits; a handler that calls ``set()`` on that event then waits for itself
forever. A replica stopped that way logged "SIGTERM received" and never drained or exited (found by the chaos
campaign). Logging from a handler has the same kind of hazard with a stream's buffer.

So the handler installed here does nothing: Python's C-level handler writes each signal's number to a pipe
(:func:`signal.set_wakeup_fd`), and a thread reading that pipe calls ``on_signal(signum, count)``, where it
may take any lock, log, set events or exit. ``count`` is how many stop signals came so far (the second one
usually means "hurry", the third "now"). SIGHUP, when an ``on_reload`` is given, calls it instead (the
configuration is read again: :mod:`hoodied.config_reload`) and counts as no stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger(__name__)

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """Deliver ``signums`` to ``on_signal`` on a thread of their own (see the module docstring).

    One at a time per process: :func:`signal.set_wakeup_fd` has one slot, which :meth:`install` takes
    (it refuses when another is installed) and :meth:`restore` gives back."""

    def __init__(
        self,
        on_signal: Callable[[int, int], None],
        signums: Sequence[int] = STOP_SIGNALS,
        *,
        on_reload: Callable[[], None] | None = None,
    ) -> None:
        self._on_signal = on_signal
        self._on_reload = on_reload  # SIGHUP, when given: not a stop, not counted
        self._signums = tuple(signums) + ((signal.SIGHUP,) if on_reload is not None else ())
        self._previous: dict[int, Any] = {}
        self._pipe: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self.count = 0

    def install(self) -> bool:
        """Take over ``signums``; False (and nothing changed) off the main thread, where Python allows no
        signal handler."""
        if threading.current_thread() is not threading.main_thread():
            return False
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # the C handler must never block on a full pipe
        previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        if previous_fd != -1:
            signal.set_wakeup_fd(previous_fd)
            os.close(read_fd)
            os.close(write_fd)
            raise RuntimeError("another signal wake-up pipe is installed in this process")
        self._pipe = (read_fd, write_fd)
        for signum in self._signums:
            self._previous[signum] = signal.signal(signum, _ignore_in_handler)
        self._thread = threading.Thread(target=self._read, args=(read_fd,), name="stop-signals", daemon=True)
        self._thread.start()
        return True

    def restore(self) -> None:
        """Give the signals and the wake-up slot back as they were; the reading thread ends."""
        if self._pipe is None:
            return
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        signal.set_wakeup_fd(-1)
        read_fd, write_fd = self._pipe
        self._pipe = None
        os.close(write_fd)  # the reader sees the end of the pipe
        if self._thread is not None:
            self._thread.join(5.0)
        with contextlib.suppress(OSError):
            os.close(read_fd)

    def _read(self, read_fd: int) -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:  # one byte per signal: its number
                if signum not in self._signums:
                    continue
                if signum == signal.SIGHUP and self._on_reload is not None:
                    try:
                        self._on_reload()
                    except Exception:
                        logger.exception("handling SIGHUP")
                    continue
                self.count += 1
                try:
                    self._on_signal(signum, self.count)
                except Exception:  # a broken callback must not stop the next signal from arriving
                    logger.exception("handling signal %d", signum)


def _ignore_in_handler(signum: int, frame: object) -> None:
    """The Python-level handler: nothing (the wake-up pipe carries the signal; see the module docstring)."""


__all__ = ["STOP_SIGNALS", "StopSignals"]
