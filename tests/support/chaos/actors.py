"""The chaos campaign's second executors (issue 32): others than the trial's replicas running the same table.

- **An alias**: a second ``hoodied run`` daemon whose configuration writes the table's path another way
  (:func:`spellings`: ``//`` inside it, a trailing ``/``, ``file://``, a symbolic link; ``s3a://`` on S3).
  One configuration naming a table twice is refused at load, so the alias is a process of its own, on the
  replicas' ZooKeeper base path: its claims must land on the replicas' keys (the table's identity).
- **A second daemon** on another ZooKeeper base path: its claims are invisible to the replicas, so only the
  instants' leases (their heartbeat files) keep it off what they run. Its own ``zookeeper.lock_base_path``
  lies under that other base path and the writers' lock is named in the table's ``hoodie:`` settings
  (``hoodie.write.lock.zookeeper.base_path``); :class:`LockWatch` checks that its lock contenders, and the
  one-offs', show up at the writers' lock and never at the other path.
- **An operator** (:class:`Operator`): one-off ``hoodied compact|cluster|logcompact PATH --mode execute
  --instant T [--take-over]`` commands on pending instants, with the writers' ZooKeeper lock and the trial's
  heartbeat settings given as ``--conf``; and ``hoodied ctl cancel`` of a running instant (the replica
  running it rolls it back to requested), retried later with ``hoodied ctl retry``. The CLI has no command
  that rolls back one instant (``restore`` rolls back to a savepoint, which would also remove acknowledged
  writes), so the cancel is the operator's rollback here.

:func:`outcomes` counts, in a daemon's JSON log, the instants it completed, the runs that ended ``lost the
race`` and those it left alone because another run held them (``kind="foreign"``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hoodie import Table
from hoodie.registry import service_named
from hoodie.storage import Storage
from hoodie.timeline.instant import State
from support.chaos.faults import OneOffOrder

logger = logging.getLogger(__name__)

#: The one-off command of each rewriting service.
ONEOFF_COMMANDS = {"compaction": "compact", "clustering": "cluster", "logcompaction": "logcompact"}
#: A one-off still running after this long is killed (a ``--take-over`` waits out the holder's run).
ONEOFF_TIMEOUT = 150.0
ZOOKEEPER_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"

_COMPLETED = re.compile(r"^(\w+) (\d{17}) of \S+ completed in ")
#: The runner's warning, one per run that lost (not the outcome's record, "... of NAME: lost the race: ...").
_LOST_RACE = re.compile(r"^(\w+) (\d{17}) of \S*[^\s:] lost the race: ")
_FOREIGN = re.compile(r"^(\w+) (\d{17}) of \S+: left alone: .*\(foreign\)$", re.DOTALL)
_ONEOFF_COMPLETED = re.compile(r"^completed (\w+) (\d{17}): ", re.MULTILINE)


def spellings(uri: str, link: Path | None = None) -> list[str]:
    """The table's base path as the replicas have it, then other ways of writing the same place: for a local
    table ``//`` inside the path, a trailing ``/``, ``file://`` and the symbolic link ``link`` (when given);
    for S3 ``s3a://`` and a trailing ``/``."""
    if uri.startswith("s3://"):
        rest = uri[len("s3://") :]
        return [uri, f"s3a://{rest}", f"{uri}/", f"s3a://{rest}/"]
    parent, _, name = uri.rstrip("/").rpartition("/")
    out = [uri, f"{parent}//{name}", f"{uri}/", f"file://{uri}", f"file://{parent}//{name}/"]
    if link is not None:
        out.append(str(link))
    return out


@dataclass
class Outcomes:
    """What one daemon's log says its runs ended with."""

    completed: Counter[tuple[str, str]] = field(default_factory=Counter)  # (service, instant)
    lost_race: int = 0
    foreign: int = 0


def outcomes(log: Path) -> Outcomes:
    """The runs a daemon's JSON log records: completed instants, runs that ended ``lost the race`` (the
    runner's warning, one per such run) and runs left alone (``kind="foreign"``)."""
    out = Outcomes()
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            message = str(json.loads(line).get("msg", ""))
        except ValueError:
            continue
        if m := _COMPLETED.match(message):
            out.completed[(m.group(1), m.group(2))] += 1
        elif _LOST_RACE.match(message):
            out.lost_race += 1
        elif _FOREIGN.match(message):
            out.foreign += 1
    return out


@dataclass
class OneOff:
    """One operator command and how it ended."""

    service: str
    instant: str
    state: str  # the instant's state when the operator picked it
    take_over: bool
    path: str
    code: int | None = None  # None: still running, or killed at ONEOFF_TIMEOUT (``timed_out``)
    output: str = ""
    seconds: float = 0.0
    timed_out: bool = False

    @property
    def kind(self) -> str:
        """``completed`` (exit 0, it ran the instant), ``nothing`` (exit 0, nothing left to do),
        ``lost_race``, ``refused_live`` (exit 3: a fresh heartbeat), ``refused`` (exit 3 otherwise),
        ``timeout`` or ``failed`` (any other exit: the store failing, the disk full...)."""
        if self.timed_out:
            return "timeout"
        if "lost the race" in self.output:
            return "lost_race"
        if self.code == 0:
            return "completed" if _ONEOFF_COMPLETED.search(self.output) else "nothing"
        if self.code == 3:
            live = ("being run elsewhere", "heartbeat is fresh", "being run by another command")
            return "refused_live" if any(w in self.output for w in live) else "refused"
        return "failed"

    def describe(self) -> str:
        flag = " --take-over" if self.take_over else ""
        last = self.output.strip().splitlines()[-1:] or [""]
        return (
            f"{ONEOFF_COMMANDS[self.service]} {self.instant} ({self.state}){flag} on {self.path}: exit "
            f"{self.code} ({self.kind}) after {self.seconds:.0f} s: {last[0][:300]}"
        )


@dataclass
class Cancel:
    """An operator's ``hoodied ctl cancel`` of a running instant, and the ``retry`` that lets it run again."""

    service: str
    instant: str
    cancel_code: int | None = None
    retry_code: int | None = None
    cancel_output: str = ""
    thread: threading.Thread | None = None

    def __str__(self) -> str:
        return f"{self.service} {self.instant}"

    def describe(self) -> str:
        """How it went; a refused cancel (exit 2) says why (usually: the instant completed before the
        command, a process of its own, got to look)."""
        why = "" if self.cancel_code == 0 else f" ({self.cancel_output.strip()[-200:]})"
        return f"{self}: exit {self.cancel_code}{why}, retry exit {self.retry_code}"


class Operator:
    """Runs the trial's one-off commands, each in a thread of its own, and records how each ended.

    ``paths`` are the table's spellings (:func:`spellings`, the replicas' first); ``conf`` the ``hoodie.*``
    settings a one-off passes as ``--conf`` (the table's service settings, the writers' lock, the
    heartbeat); ``storage_options`` the replicas' (each a ``--storage-option``); ``control`` a daemon
    configuration file for ``hoodied ctl`` (the replicas' ZooKeeper base path and table label)."""

    def __init__(
        self,
        work: Path,
        storage: Storage,
        paths: Sequence[str],
        conf: Mapping[str, str],
        env: Mapping[str, str],
        control: Path,
        table_label: str,
        *,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.work = work
        self.storage_options = dict(storage_options or {})
        self.storage = storage
        self.paths = list(paths)
        self.conf = dict(conf)
        self.env = dict(env)
        self.control = control
        self.table_label = table_label
        self.oneoffs: list[OneOff] = []
        self.cancels: list[Cancel] = []
        self.errors: list[str] = []
        self._threads: list[threading.Thread] = []
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._guard = threading.Lock()
        self._seq = 0

    # -- one-off commands -----------------------------------------------------------------------------------

    def _pending(self) -> list[tuple[str, str, str]]:
        """(service, instant, state) of every pending compaction, log compaction and clustering."""
        table = Table.load(self.storage)
        out: list[tuple[str, str, str]] = []
        for name in ONEOFF_COMMANDS:
            service = service_named(name)
            if service.applies_to(table.config) is not None:
                continue
            out.extend((name, i.time, i.state.name.lower()) for i in service.pending(table))
        return out

    def launch(self, order: OneOffOrder) -> str:
        """Start a one-off on a pending instant (an inflight one when there is any: a replica is likely
        running it); returns what it started, for the trial's events."""
        try:
            pending = self._pending()
        except Exception as e:  # the store failing or the disk full right now: the operator tries later
            return f"no one-off: cannot read the timeline ({type(e).__name__})"
        if not pending:
            return "no one-off: nothing pending"
        rng = random.Random(order.draw)
        inflight = [p for p in pending if p[2] == State.INFLIGHT.name.lower()]
        service, instant, state = rng.choice(inflight if inflight and rng.random() < 0.8 else pending)
        path = self.paths[0] if rng.random() < 0.5 else rng.choice(self.paths)
        oneoff = OneOff(service, instant, state, order.take_over, path)
        with self._guard:
            self.oneoffs.append(oneoff)
            self._seq += 1
            seq = self._seq
        thread = threading.Thread(
            target=self._run_oneoff, args=(oneoff, seq), name=f"oneoff-{seq}", daemon=True
        )
        self._threads.append(thread)
        thread.start()
        flag = " --take-over" if order.take_over else ""
        return f"{ONEOFF_COMMANDS[service]} {instant} ({state}){flag} on {path}"

    def _argv(self, oneoff: OneOff) -> list[str]:
        argv = [sys.executable, "-m", "hoodied.cli", ONEOFF_COMMANDS[oneoff.service], oneoff.path]
        argv += ["--mode", "execute", "--instant", oneoff.instant]
        if oneoff.take_over:
            argv.append("--take-over")
        if oneoff.service != "logcompaction":  # log compaction runs in the command's process
            argv += ["--spark-master", "local[1]", "--conf", "spark.ui.enabled=false"]
            argv += ["--conf", "spark.driver.memory=512m"]
        for key, value in sorted(self.conf.items()):
            argv += ["--conf", f"{key}={value}"]
        for key, value in sorted(self.storage_options.items()):
            argv += ["--storage-option", f"{key}={value}"]
        return argv

    def _run_oneoff(self, oneoff: OneOff, seq: int) -> None:
        log = self.work / f"oneoff-{seq}.log"
        started = time.monotonic()
        with log.open("wb") as out:
            out.write((" ".join(self._argv(oneoff)) + "\n").encode())
            out.flush()
            proc = subprocess.Popen(
                self._argv(oneoff),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
            with self._guard:
                self._procs[seq] = proc
            try:
                oneoff.code = proc.wait(ONEOFF_TIMEOUT)
            except subprocess.TimeoutExpired:
                oneoff.timed_out = True
                _kill_group(proc)
            finally:
                with self._guard:
                    self._procs.pop(seq, None)
        oneoff.seconds = time.monotonic() - started
        oneoff.output = log.read_text(errors="replace").split("\n", 1)[-1]
        logger.info("chaos: one-off %s", oneoff.describe())

    # -- cancel and retry ------------------------------------------------------------------------------------

    def cancel(self) -> Cancel | None:
        """``hoodied ctl cancel`` of an inflight instant (run in the background; :meth:`retry` waits for
        it), or ``None`` when nothing is inflight."""
        try:
            inflight = [p for p in self._pending() if p[2] == State.INFLIGHT.name.lower()]
        except Exception:
            return None
        if not inflight:
            return None
        service, instant, _ = inflight[0]
        cancel = Cancel(service, instant)

        def run() -> None:
            cancel.cancel_code, cancel.cancel_output = self._ctl("cancel", service, instant)

        cancel.thread = threading.Thread(target=run, name=f"cancel-{instant}", daemon=True)
        cancel.thread.start()
        with self._guard:
            self.cancels.append(cancel)
        return cancel

    def retry(self, what: object) -> None:
        """``hoodied ctl retry`` of a cancelled instant, once its cancel ended (tried until it is taken: an
        instant left cancelled would stay pending for good)."""
        assert isinstance(what, Cancel)
        cancel = what

        def run() -> None:
            if cancel.thread is not None:
                cancel.thread.join(120)
            for _ in range(10):
                cancel.retry_code, _ = self._ctl("retry", cancel.service, cancel.instant)
                if cancel.retry_code == 0:
                    return
                time.sleep(2.0)
            self.errors.append(f"hoodied ctl retry {cancel} did not succeed in 10 attempts")

        thread = threading.Thread(target=run, name=f"retry-{cancel.instant}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _ctl(self, command: str, service: str, instant: str) -> tuple[int | None, str]:
        """Run ``hoodied ctl COMMAND``; its exit status (None: it hung) and output."""
        argv = [sys.executable, "-m", "hoodied.cli", "ctl", command, self.table_label]
        argv += ["--config", str(self.control), "--service", service, "--instant", instant]
        argv += ["--reason", "chaos", "--by", "chaos-operator"]
        log = self.work / "operator-ctl.log"
        with self._guard, log.open("ab") as out:
            out.write(f"$ ctl {command} {service} {instant}\n".encode())
        try:
            done = subprocess.run(argv, capture_output=True, env=self.env, timeout=120)
        except subprocess.TimeoutExpired:
            return None, "(hung for 120 s)"
        output = (done.stdout + done.stderr).decode(errors="replace")
        with self._guard, log.open("a", encoding="utf-8") as out:
            out.write(f"{output}exit {done.returncode}\n")
        return done.returncode, output

    # -- the end ---------------------------------------------------------------------------------------------

    def finish(self, timeout: float) -> None:
        """Wait for the commands still running (a ``--take-over`` waits out its holder), then kill what is
        left."""
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._guard:
            procs = list(self._procs.values())
        for proc in procs:
            _kill_group(proc)
        for thread in list(self._threads):
            thread.join(10)

    def counts(self) -> Counter[str]:
        """``oneoff_runs`` (commands started), ``oneoff_take_over`` (of them with ``--take-over``),
        ``oneoff_refused`` (every exit 3), and one count per way they ended: ``oneoff_completed``,
        ``oneoff_nothing``, ``oneoff_refused_live`` (a fresh heartbeat), ``oneoff_lost_race``,
        ``oneoff_failed``, ``oneoff_timeout``; ``oneoff_waited``: ``--take-over`` commands that met a fresh
        heartbeat and waited; ``cancels`` (``ctl cancel`` commands taken)."""
        out: Counter[str] = Counter()
        for o in self.oneoffs:
            out["oneoff_runs"] += 1
            out["oneoff_take_over"] += o.take_over
            out["oneoff_refused"] += o.code == 3
            out["oneoff_waited"] += o.take_over and "--take-over: waiting" in o.output
            if o.kind != "refused":
                out[f"oneoff_{o.kind}"] += 1
        out["cancels"] = sum(1 for c in self.cancels if c.cancel_code == 0)
        out["cancels_refused"] = sum(1 for c in self.cancels if c.cancel_code not in (0, None))
        return +out

    def completions(self) -> Counter[tuple[str, str]]:
        """The instants the one-offs completed, (service, instant)."""
        out: Counter[tuple[str, str]] = Counter()
        for o in self.oneoffs:
            for m in _ONEOFF_COMPLETED.finditer(o.output):
                out[(m.group(1), m.group(2))] += 1
        return out


class LockWatch:
    """Watches who contends for the table lock at ``shared`` (the writers' lock) and at ``elsewhere`` (where
    the second daemon's lock would be if it followed its own ZooKeeper base path): each contender node's
    holder (its ``replica``) counted once."""

    def __init__(self, connect: str, shared: str, elsewhere: str | None) -> None:
        from kazoo.client import KazooClient

        self._client: Any = KazooClient(hosts=connect, timeout=10.0)
        self.seen: dict[str, Counter[str]] = {shared: Counter()}
        if elsewhere is not None:
            self.seen[elsewhere] = Counter()
        self._known: set[str] = set()
        self._guard = threading.Lock()

    def start(self) -> None:
        from kazoo.recipe.watchers import ChildrenWatch

        self._client.start(timeout=20)
        for path in self.seen:
            self._client.ensure_path(path)
            ChildrenWatch(self._client, path, lambda children, p=path: self._changed(p, children))

    def _changed(self, path: str, children: list[str]) -> bool:
        from kazoo.exceptions import NoNodeError

        for child in children:
            node = f"{path}/{child}"
            with self._guard:
                if node in self._known:
                    continue
                self._known.add(node)
            try:
                raw, _ = self._client.get(node)
                holder = str(json.loads(raw or b"{}").get("replica", "?"))
            except (NoNodeError, ValueError):
                holder = "?"  # gone before we read it
            with self._guard:
                self.seen[path][holder] += 1
        return True

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._client.stop()
            self._client.close()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)


__all__ = [
    "ONEOFF_COMMANDS",
    "Cancel",
    "LockWatch",
    "OneOff",
    "Operator",
    "Outcomes",
    "outcomes",
    "spellings",
]
