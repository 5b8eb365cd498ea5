"""Completion decisions: one conditional write decides whether an attempt completes its instant, so a stale
holder cannot complete an instant another run took over.

A lease (a claim, the heartbeat, a storage-based lock) only says who *should* write. A run paused between its
last fence check and its completing PUT (a long GC, a frozen VM, a request held in the network) can wake
after a takeover rolled its attempt back and ran the instant again; on a v8+ timeline the completed file's
name carries the completion time, so its create-if-absent never collides with the new run's and the instant
would complete twice, the stale completion naming files the takeover deleted.

So completion and takeover meet at one object per (instant, attempt) in
``.hoodie/.aux/hoodied/decisions/<instant>/<attempt>.json``, created once with create-if-absent and never
changed:

- An attempt completes only after it **created its decision** ``complete``, which carries the completed
  timeline file (its name, completion time included, and its bytes) and which metadata-table update the
  commit makes, with that deltacommit's completion time on a v8+ metadata table: whoever writes it (the
  decider, a roll forward, a stale attempt's held request) names its completed file alike, so only the first
  create lands (a completion time taken at the write would let a held PUT add a second completed
  deltacommit). Before the decision the attempt wrote only files of its own (its write tokens name it); the
  metadata table's deltacommit and the completed file are written after it.
- A run that rolls an attempt back (a takeover) first **voids** every attempt it is about to undo: the
  attempts whose files it found, and those it took the lease over from. Voiding is creating the attempt's
  decision as ``void``. Once void, that attempt's own create fails and it gives up
  (:class:`~hoodie.errors.LostRace`); nothing it holds back can make it complete.
- A void that finds a ``complete`` decision instead has lost: the attempt decided first, so the instant is
  completed from its decision by whoever finds it (:func:`roll_forward`: the metadata table's deltacommit,
  rebuilt from the decided commit's write stats, unless it is completed already, then the completed file),
  and nothing is rolled back. Publishing is idempotent: the same name with the same bytes, whoever writes
  it, however late, so a stale attempt's held PUT and the roll forward's leave one completed file; and the
  decider's own metadata-table write never replaces a completed deltacommit (the roll forward's).

A completer deletes its own decision once its completed file is on the timeline (the timeline then says it
all; a late voider re-reads the timeline after voiding and finds the instant completed). Void decisions are
kept: the attempt they void may still wake up. Hudi's readers and writers do not look under ``.aux``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal

from hoodie.config import TableConfig
from hoodie.errors import CommitConflict, FileAlreadyExists, LostRace, StorageError
from hoodie.lock import LockProvider, held
from hoodie.metadata.partition_lists import mark_built
from hoodie.metadata.updates import update_for_clean_metadata, update_for_rewrite, update_for_write
from hoodie.metadata.writer import (
    MetadataUpdate,
    forget_metadata_instant,
    open_metadata_table,
    write_metadata_update,
)
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import REPLACE_COMMIT
from hoodie.timeline.metadata import (
    CommitMetadata,
    decode_clean_metadata,
    decode_commit_metadata,
    decode_index_commit_metadata,
    encode_commit_metadata,
)
from hoodie.write.partition_delete import replaced_keys, update_for_partition_delete

logger = logging.getLogger(__name__)

#: Where decisions live, relative to the table's base path.
DECISIONS_FOLDER = ".hoodie/.aux/hoodied/decisions"

Verdict = Literal["complete", "void"]

#: The metadata-table updates a decided commit makes, by name (a roll forward rebuilds them from the commit's
#: completed metadata): a compaction's new base files, a clustering's (records move: the record index
#: follows), a log compaction's new log files, a clean's deleted files, a partition TTL's dropped file
#: groups. ``indexing``: the records an indexing built, which nothing but an indexing run can make again
#: (it rolls its own instant's decision forward with the records it built, :mod:`hoodie.indexing.execute`);
#: any other roll forward publishes such a decision only once its deltacommit is completed.
MetadataStep = Literal["", "rewrite", "rewrite_moving_records", "log_files", "clean", "ttl", "indexing"]
_STEPS = ("", "rewrite", "rewrite_moving_records", "log_files", "clean", "ttl", "indexing")


def metadata_update_of(
    storage: Storage, step: MetadataStep, instant_time: str, content: bytes, action: str
) -> Callable[[TableConfig], MetadataUpdate] | None:
    """The metadata-table update ``step`` names for the commit whose completed file holds ``content`` (None
    for none, and for an indexing's built records, which cannot be made from its commit)."""
    if not step or step == "indexing":
        return None

    def build(config: TableConfig) -> MetadataUpdate:
        if step == "clean":
            return update_for_clean_metadata(storage, config, instant_time, decode_clean_metadata(content))
        metadata = decode_commit_metadata(content, table_version=config.table_version, action=action)
        if step == "ttl":  # the replaced file groups' slices are on storage until the replacecommit completes
            table = Table.load(storage)
            replaced = metadata.partition_to_replace_file_ids
            keys = replaced_keys(table, replaced)
            return update_for_partition_delete(storage, config, table, instant_time, tuple(replaced), keys)
        stats = [stat for group in metadata.partition_to_write_stats.values() for stat in group]
        if step == "log_files":
            return update_for_write(storage, config, instant_time, stats, index_log_records=False)
        return update_for_rewrite(
            storage, config, instant_time, stats, record_index=step == "rewrite_moving_records"
        )

    return build


#: The attempt number a rollback's completion is decided under (:func:`decide_shared`): real attempts are
#: numbered from 1 (:data:`hoodie.write.attempt.ATTEMPT_NUMBERS`).
SHARED_ATTEMPT = 0


def decision_path(instant_time: str, attempt: int) -> str:
    """The decision object of ``attempt``'s run of the instant at ``instant_time``."""
    return f"{DECISIONS_FOLDER}/{instant_time}/{attempt}.json"


@dataclass(frozen=True)
class Decision:
    """What was decided for one attempt of one instant: ``complete`` (with the completed timeline file:
    ``completed_file``, relative to the table, and its ``content``) or ``void`` (``by`` the attempt that
    voided it, ``None`` for a run without one)."""

    instant_time: str
    attempt: int
    verdict: Verdict
    by: int | None = None
    completed_file: str = ""
    content: bytes = b""
    action: str = ""
    metadata_step: MetadataStep = ""
    metadata_completion: str = ""

    def encode(self) -> bytes:
        return json.dumps(
            {
                "instant": self.instant_time,
                "attempt": self.attempt,
                "verdict": self.verdict,
                "by": self.by,
                "completed_file": self.completed_file,
                "content": base64.b64encode(self.content).decode("ascii"),
                "action": self.action,
                "metadata_step": self.metadata_step,
                "metadata_completion": self.metadata_completion,
            },
            separators=(",", ":"),
        ).encode("utf-8")

    @classmethod
    def parse(cls, data: bytes, where: str) -> Decision:
        """The decision in ``data`` (read from ``where``); :class:`CommitConflict` when it is not one: a
        decision that cannot be read decides nothing, and nothing may be done on its behalf."""
        try:
            value = json.loads(data)
            verdict = value["verdict"]
            if verdict not in ("complete", "void"):
                raise ValueError(f"verdict {verdict!r}")
            by = value.get("by")
            step = value.get("metadata_step", "")
            if step not in _STEPS:
                raise ValueError(f"metadata step {step!r}")
            return cls(
                str(value["instant"]),
                int(value["attempt"]),
                verdict,
                None if by is None else int(by),
                str(value.get("completed_file", "")),
                base64.b64decode(value.get("content", ""), validate=True),
                str(value.get("action", "")),
                step,
                str(value.get("metadata_completion", "")),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CommitConflict(f"the completion decision {where} is unreadable ({e}): left as it is") from e

    def describe(self) -> str:
        if self.verdict == "complete":
            return f"attempt {self.attempt} decided to complete {self.instant_time} as {self.completed_file}"
        by = f"attempt {self.by}" if self.by is not None else "a rollback"
        return f"attempt {self.attempt} of {self.instant_time} was voided by {by}"


def read_decision(storage: Storage, instant_time: str, attempt: int) -> Decision | None:
    """``attempt``'s decision on the instant, ``None`` when there is none."""
    path = decision_path(instant_time, attempt)
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return None
    return Decision.parse(data, path)


def _create(storage: Storage, decision: Decision) -> Decision:
    """Create ``decision`` if its attempt has none; return the one that stands (ours or the earlier)."""
    path = decision_path(decision.instant_time, decision.attempt)
    try:
        storage.create(path, decision.encode())
        return decision
    except FileAlreadyExists:
        found = read_decision(storage, decision.instant_time, decision.attempt)
        if found is None:  # deleted by its completer since: the timeline says the rest
            raise LostRace(
                f"the decision of attempt {decision.attempt} on {decision.instant_time} came and went while "
                "this run wrote its own: the instant completed meanwhile"
            ) from None
        return found


def decide_complete(
    storage: Storage,
    instant_time: str,
    attempt: int,
    completed_file: str,
    content: bytes,
    *,
    action: str = "",
    metadata_step: MetadataStep = "",
    metadata_completion: str = "",
) -> Decision:
    """Decide that ``attempt`` completes the instant (its completed ``action``) with the timeline file
    ``completed_file`` holding ``content``, the metadata table getting ``metadata_step`` as a deltacommit
    completed at ``metadata_completion`` (v8+; write both after this returns; returns the decision, to
    publish). :class:`LostRace` when the attempt was voided: another run took the instant over, and this
    attempt must not complete it."""
    ours = Decision(
        instant_time,
        attempt,
        "complete",
        None,
        completed_file,
        content,
        action,
        metadata_step,
        metadata_completion,
    )
    standing = _create(storage, ours)
    if standing.verdict == "void":
        raise LostRace(
            f"lost the race: {standing.describe()} (it took the instant over), so this attempt does not "
            "complete it"
        )
    if standing.completed_file != completed_file or standing.content != content:
        # Our own earlier try of this very commit (a retried request): the first one's file stands.
        raise CommitConflict(
            f"attempt {attempt} already decided to complete {instant_time} as {standing.completed_file}, "
            f"not as {completed_file}"
        )
    return standing


def decide_shared(
    storage: Storage, instant_time: str, completed_file: str, content: bytes, *, action: str = ""
) -> Decision:
    """Decide to complete an instant that any run may finish, doing the same work (a rollback: whoever finds
    it pending deletes its planned files), with the timeline file ``completed_file`` holding ``content``.
    Every finisher decides under :data:`SHARED_ATTEMPT`, so the first decision stands; returns it (this one
    or an earlier run's), to publish. Nothing is voided. :class:`LostRace` when a decision stood and was
    deleted meanwhile (its run published it). The caller re-reads the timeline before publishing its own
    decision: one that lands after another run's decision was published and forgotten must not be."""
    ours = Decision(instant_time, SHARED_ATTEMPT, "complete", None, completed_file, content, action)
    return _create(storage, ours)


def void_attempts(
    storage: Storage, instant_time: str, attempts: Iterable[int], by: int | None
) -> Decision | None:
    """Void each of ``attempts`` (``by``: the voiding run's, which may be among them: a run giving up voids
    itself) so none of them can complete the instant any more; return the ``complete`` decision of one that
    decided first (the instant is then completed from it, :func:`roll_forward`, not rolled back), else
    ``None``."""
    decided: Decision | None = None
    for attempt in sorted(set(attempts)):
        standing = _create(storage, Decision(instant_time, attempt, "void", by))
        if standing.verdict == "complete":
            decided = standing
        elif standing.by == by:
            logger.info("voided attempt %d of %s on %s", attempt, instant_time, storage.uri)
    return decided


def publish(storage: Storage, decision: Decision) -> bool:
    """Write the completed timeline file a ``complete`` ``decision`` names, unless it is there with the same
    bytes (idempotent: the decider, a roll forward and a late PUT all leave one file). Returns whether this
    call wrote it; :class:`CommitConflict` when another file sits at its name."""
    if decision.verdict != "complete" or not decision.completed_file:
        raise ValueError(f"only a complete decision is published: {decision.describe()}")
    try:
        storage.create(decision.completed_file, decision.content)
        return True
    except FileAlreadyExists:
        if storage.read(decision.completed_file) == decision.content:
            return False
        raise CommitConflict(
            f"{decision.completed_file} holds another completion than {decision.describe()}"
        ) from None


def written_since(table: Table, decision: Decision) -> str | None:
    """A write that completed after the instant of a decided replacecommit (v8+: its completion time later
    than the instant's time; v6: its instant time later, the scheduling rule making that enough) into a file
    group the replacecommit replaces, described; None when there is none, or the decision replaces nothing.

    The decider's own check saw no such write. One found now completed while the decision was not yet
    published: the decider paused between the two and its table lock expired, so the write's commit, under
    the lock it then took, saw the replacecommit pending. Published now, the replacecommit would hide that
    write's records (chaos seed 632: a clustering decided, stalled; a batch committed into its groups; the
    roll forward replaced them)."""
    if decision.action != REPLACE_COMMIT:
        return None
    T = decision.instant_time
    config = table.config
    decided = decode_commit_metadata(
        decision.content, table_version=config.table_version, action=REPLACE_COMMIT
    )
    replaced = {(p, f) for p, ids in decided.partition_to_replace_file_ids.items() for f in ids}
    if not replaced:
        return None
    v8 = config.table_version >= 8
    for other in table.timeline.completed_writes():
        if other.time == T:
            continue
        if not ((other.completion_time or other.time) > T if v8 else other.time > T):
            continue
        md = table.commit_metadata(other)
        theirs = {(s.partition_path or "", s.file_id) for s in md.write_stats if s.file_id}
        theirs |= set(md.replaced_file_ids)
        hit = sorted(theirs & replaced)
        if hit:
            groups = ", ".join(f"{p or '<table>'}/{f}" for p, f in hit[:5])
            return f"{other.action} {other.time} completed since and wrote file group(s) {groups}"
    return None


def _publish_empty(storage: Storage, lock: LockProvider, table: Table, decision: Decision, late: str) -> bool:
    """Complete a decided replacecommit that a later write conflicts with (:func:`written_since`) as a
    replacecommit that replaces and writes nothing, at the decided file's name (the caller holds ``lock``):
    the decider's late PUT of that name then fails, the conflicting write's records stay visible, and the
    decided attempt's new files, which no completed instant names, go. Its metadata-table deltacommit (if
    the decider wrote it) is rolled back and an empty one written in its place, so a late decider does not
    write it again. Returns whether this call published the file."""
    T = decision.instant_time
    config = table.config
    decided = decode_commit_metadata(
        decision.content, table_version=config.table_version, action=REPLACE_COMMIT
    )
    empty = CommitMetadata(
        extra_metadata=dict(decided.extra_metadata),
        operation_type=decided.operation_type,
        compacted=False,
        replace=True,
    )
    content = encode_commit_metadata(empty, table_version=config.table_version, action=REPLACE_COMMIT)
    forget_metadata_instant(storage, lock, T)
    if open_metadata_table(storage, config) is not None:
        write_metadata_update(
            storage,
            config,
            lock,
            lambda cfg: MetadataUpdate(T),
            service="roll forward",
            completion_time=decision.metadata_completion or None,
        )
    wrote = publish(storage, replace(decision, content=content))
    for path in decided.written_file_paths:
        with contextlib.suppress(FileNotFoundError):
            storage.delete(path)
    logger.warning(
        "%s, but %s: published %s as an empty replacecommit (nothing replaced) on %s and deleted the "
        "attempt's %d new file(s); the file groups can be planned again",
        decision.describe(),
        late,
        T,
        storage.uri,
        len(decided.written_file_paths),
    )
    return wrote


def roll_forward(storage: Storage, lock: LockProvider, decision: Decision) -> bool:
    """Complete the instant from a ``complete`` ``decision`` another attempt made (module doc), under
    ``lock``: its metadata-table deltacommit, unless completed already, then its completed file. A decided
    replacecommit that a write completed since conflicts with (:func:`written_since`) is completed empty
    instead. Returns whether this call published the file."""
    with held(lock):
        table = Table.load(storage)
        if not table.timeline.is_completed(decision.instant_time):
            late = written_since(table, decision)
            if late is not None:
                return _publish_empty(storage, lock, table, decision, late)
        if decision.metadata_step == "indexing":
            return _publish_indexing(storage, decision)
        build = metadata_update_of(
            storage, decision.metadata_step, decision.instant_time, decision.content, decision.action
        )
        if build is not None:
            config = TableConfig.load(storage)
            mdt = open_metadata_table(storage, config)
            if mdt is not None and not mdt.timeline.is_completed(decision.instant_time):
                write_metadata_update(
                    storage,
                    config,
                    lock,
                    build,
                    service="roll forward",
                    completion_time=decision.metadata_completion or None,
                )
        wrote = publish(storage, decision)
    logger.warning("rolled %s forward on %s", decision.describe(), storage.uri)
    return wrote


def _publish_indexing(storage: Storage, decision: Decision) -> bool:
    """Roll a decided indexing forward outside an indexing run (the caller holds the lock): only once the
    metadata table's deltacommit of its built records is completed (the decider wrote it; they cannot be made
    again here), then its completed file, and its partitions move to the built list. Otherwise
    :class:`CommitConflict`: the instant stays pending for the next indexing run, which completes it."""
    T = decision.instant_time
    mdt = open_metadata_table(storage, TableConfig.load(storage))
    if mdt is None or not mdt.timeline.is_completed(T):
        raise CommitConflict(
            f"{decision.describe()}, and its built records are not in the metadata table: only an indexing "
            "run can write them; left pending for it"
        )
    wrote = publish(storage, decision)
    infos = decode_index_commit_metadata(decision.content).index_partition_infos
    mark_built(storage, [i.metadata_partition_path or "" for i in infos])
    logger.warning("rolled %s forward on %s", decision.describe(), storage.uri)
    return wrote


def forget_decision(storage: Storage, instant_time: str, attempt: int) -> None:
    """Delete ``attempt``'s ``complete`` decision once its completed file is on the timeline (module doc);
    a store failure leaves it for later (publishing it again changes nothing)."""
    try:
        storage.delete(decision_path(instant_time, attempt))
    except FileNotFoundError:
        pass  # another run that published it forgot it
    except StorageError as e:
        logger.warning("the completion decision of %s (attempt %d) stays: %s", instant_time, attempt, e)


__all__ = [
    "DECISIONS_FOLDER",
    "SHARED_ATTEMPT",
    "Decision",
    "MetadataStep",
    "decide_complete",
    "decide_shared",
    "decision_path",
    "forget_decision",
    "metadata_update_of",
    "publish",
    "read_decision",
    "roll_forward",
    "void_attempts",
    "written_since",
]
