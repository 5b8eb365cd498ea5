"""A store's event queue read on a thread of its own (:class:`QueueListener`): what S3's SQS queues
(:mod:`hoodied.s3_events`) and Azure's storage queues (:mod:`hoodied.azure_events`) share.

The thread reads the queue until stopped (:meth:`QueueListener.receive_once`, one read each). A read that
fails is retried with back-off (1 s doubling up to :data:`MAX_BACKOFF`), each distinct failure logged once
and the recovery once; the tables are polled by their sweeps meanwhile. Between reads that succeed it waits
what :meth:`QueueListener.idle_wait` says (nothing for a long poll, which waits in the store).
"""

from __future__ import annotations

import abc
import logging
import threading
from collections import Counter
from typing import ClassVar

from hoodied.change_events import ChangeEvents

MAX_BACKOFF = 60.0


class QueueListener(abc.ABC):
    """Reads the queue at ``queue_url`` on a thread of its own and announces what it reads to ``events``."""

    #: The queue's kind in log lines ("S3", "Azure"), the thread's name, and the logger of the source.
    kind: ClassVar[str]
    thread_name: ClassVar[str]
    log: ClassVar[logging.Logger]

    def __init__(self, queue_url: str, events: ChangeEvents) -> None:
        self.queue_url = queue_url
        self.events = events
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Messages read, what in them named no timeline, reads that failed.
        self.counts: Counter[str] = Counter()
        self.last_error: str | None = None

    def start(self) -> QueueListener:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @abc.abstractmethod
    def receive_once(self) -> int:
        """One read: announce what came and delete it; returns the messages read."""

    def idle_wait(self, read: int) -> float:
        """Seconds to wait before the next read after one that read ``read`` messages (none by default)."""
        return 0.0

    def describe_error(self, error: Exception) -> str:
        """``error`` on one line, the same for the same cause (a failure is logged once while it lasts)."""
        return f"{type(error).__name__}: {' '.join(str(error).split())}"

    def _run(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                read = self.receive_once()
                backoff = 1.0
                if self.last_error is not None:
                    self.log.info("the %s event queue %s can be read again", self.kind, self.queue_url)
                    self.last_error = None
                wait = self.idle_wait(read)
                if wait:
                    self._stop.wait(wait)
            except Exception as e:  # the queue unreachable or refusing: the sweeps go on meanwhile
                self.counts["receive_failed"] += 1
                message = self.describe_error(e)
                if message != self.last_error:
                    self.log.error(
                        "cannot read the %s event queue %s (retrying in %.0f s; the tables are swept "
                        "meanwhile): %s",
                        self.kind,
                        self.queue_url,
                        backoff,
                        message,
                    )
                self.last_error = message
                self._stop.wait(backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)


__all__ = ["MAX_BACKOFF", "QueueListener"]
