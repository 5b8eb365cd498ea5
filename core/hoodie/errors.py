"""The errors of the format library, in the words of the format.

Every error the library raises on purpose derives from :class:`HoodieError`, so callers (the daemon, the CLI)
can tell "the table or input is bad" apart from bugs. Messages name what was found and where.
"""

from __future__ import annotations


class HoodieError(Exception):
    """Base class of every error raised on purpose by :mod:`hoodie`."""


class UnsupportedTable(HoodieError):
    """The table exists but is of a kind this library refuses to read or write.

    Raised up front for table versions other than 6, 8 and 9, base file formats other than PARQUET, and
    features whose semantics we do not implement. The message names the value that was found.
    """


class InvalidTableConfig(HoodieError):
    """``hoodie.properties`` is missing, unreadable, or holds a value that cannot be right."""


class TableNotFound(HoodieError):
    """No Hudi table (no ``.hoodie/hoodie.properties``) at the given location."""


class InvalidInstant(HoodieError):
    """A timeline file name or instant time does not follow Hudi's grammar."""


class InvalidFileName(HoodieError):
    """A base or log file name does not follow Hudi's grammar."""


class CorruptTimelineFile(HoodieError):
    """A timeline file (commit metadata, plan) cannot be decoded."""


class CorruptLogBlock(HoodieError):
    """A log block's magic, lengths or content do not check out."""


class SchemaMismatch(HoodieError):
    """A file's column cannot be read as the table schema's type (an evolution Hudi does not allow)."""


class InvalidRecordKey(HoodieError):
    """A row's record key is null or empty (Hudi's ``HoodieKeyException``)."""


class CorruptBaseFile(HoodieError):
    """A base (Parquet) file cannot be read."""


class PathOutsideTable(HoodieError):
    """A path (in a plan or metadata) resolves outside the table's base path."""


class StorageError(HoodieError):
    """The storage backend failed an operation."""


class StoreRefused(StorageError):
    """The object store answered with a refusal no retry changes (no such bucket, bad credentials, access
    denied: :func:`hoodie.storage.store_errors.permanent`); the request was sent once."""


class FileAlreadyExists(StorageError):
    """A create-if-absent found the file already present."""


class VersionConflict(StorageError):
    """A conditional replace found another version of the object than the one it was based on (an S3 ETag,
    a GCS generation): someone else wrote it in between. Nothing was written."""


class WriteOutcomeUnknown(StorageError):
    """A write failed in a way that leaves open whether the store applied it (the connection broke after the
    request was sent, or the answer came too late), and the store could not be asked afterwards either.

    Unlike a failure, it may have happened: a caller must not clean up after it (delete what it wrote, roll
    its instant back) before reading the store again (pyiceberg's ``CommitStateUnknownException``)."""


class TableAlreadyExists(HoodieError):
    """A new table was to be created where ``.hoodie/hoodie.properties`` already exists."""


class NothingToDo(HoodieError):
    """A table service was asked to run an instant that is not pending (any more): another runner completed
    it, or it never was on the timeline. Not a failure: there is nothing left to do. ``unknown``: the
    instant named is no instant of the service at all (a mistyped time): the one-off commands refuse it."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


class Deferred(HoodieError):
    """A table service cannot run its instant yet: it waits for other instants to complete first (the message
    names them). Nothing was done; not a failure: run it again once they completed."""


class CommitConflict(HoodieError):
    """Another writer changed the instant first: the transition definitely did not happen.

    Raised when a timeline transition finds the instant in another state than the one it starts from (the
    previous state's file is missing, or the next state's file is already there), or when the atomic
    create-if-absent of the new file loses a race. Nothing was written by the failed call, so the caller may
    re-read the timeline and decide; it must not clean up what the winner wrote.
    """


class WriteConflict(CommitConflict):
    """Another writer committed to the same file groups after this write took its view of the table
    (optimistic concurrency control, as Hudi's ``SimpleConcurrentFileWritesConflictResolutionStrategy``).

    The write definitely did not commit: its instant stays inflight and its files are invisible to readers
    until a rollback removes them. Retry the batch on a fresh view.
    """


class LostRace(CommitConflict):
    """Another run of the same instant (another replica, another daemon, a one-off command) completed it or
    took it over first: this run commits nothing and deletes nothing but the files its own attempt wrote
    (:mod:`hoodie.write.attempt`); the winner's output stands."""


class OverlappingPlan(HoodieError):
    """A compaction, log compaction or clustering plan shares file groups with an older pending plan of those
    services, or with a newer one that already started (:mod:`hoodie.write.plan_overlap`): Hudi allows one
    pending plan per file group, and two would rewrite one file slice twice. A plan that was only requested
    was deleted before this was raised (as if it had never been scheduled); an inflight one is left as it is
    for a human to decide. The message names both instants and the shared file groups. Not retried."""


class LeaseHeld(HoodieError):
    """A live run holds the instant's lease (its heartbeat is fresh, :mod:`hoodie.write.heartbeat`): the
    instant is neither rolled back nor run here. The message names the holder."""


class LeaseLost(HoodieError):
    """This run's lease on its instant was lost (its heartbeat went stale while it was paused, or another run
    took the lease over): it must not commit, and deletes nothing of the instant."""


class ClusteringUpdateRejected(HoodieError):
    """A write's updates or deletes hit file groups that a pending clustering rewrites, and its writer uses
    the reject update strategy (``hoodie.clustering.updates.strategy``: Hudi's default
    ``SparkRejectUpdateStrategy``, whose writers fail with ``HoodieClusteringUpdateException``).

    Raised after tagging, before any file is written: the write definitely did not happen. The message names
    the file groups and the clustering instants; retry once the clustering completed (its new file groups
    hold the records then), or leave those records out of the batch.
    """

    def __init__(
        self,
        message: str,
        *,
        clustering_instants: tuple[str, ...] = (),
        file_groups: tuple[object, ...] = (),
    ) -> None:
        super().__init__(message)
        #: The pending clusterings in the way, by instant time.
        self.clustering_instants = clustering_instants
        #: The file groups the write would have updated (``FileGroupId`` values).
        self.file_groups = file_groups


class LockRequired(HoodieError):
    """An operation needs the table lock and none was given (object stores offer no atomic
    create-if-absent, and v8+ completion times must be taken under the lock)."""


class LockError(HoodieError):
    """The table lock cannot be taken or released as asked."""


class LockTimeout(LockError):
    """The table lock was not acquired within the timeout; the message names the current holder."""


class LockLost(LockError):
    """The lock expired or was taken over while we believed we held it: work done under it may have raced."""


class TimeTravelRefused(HoodieError):
    """A time travel to an instant whose files the cleaner removed, or whose instants left the active
    timeline: its answer would be silently wrong (rows missing), so it is refused, as Hudi refuses it
    ("Cleaner cleaned up the timestamp of interest"). The message names the earliest instant to read."""


class CorruptBloomFilter(HoodieError):
    """A serialized bloom filter cannot be decoded.

    Raised for a base file footer's ``org.apache.hudi.bloomfilter`` that is not Base64, whose bytes do not
    parse, or whose type code is neither ``SIMPLE`` nor ``DYNAMIC_V0``.
    """


class InvalidWriteConfig(HoodieError):
    """A write option (``hoodie.parquet.*``, ``hoodie.index.bloom.*``, ...) holds a value that cannot be used.

    The message names the key and the value.
    """


class UnsupportedHFile(HoodieError):
    """An HFile of a kind this library does not read: a major version other than 3, a compression codec
    other than GZ or NONE, encryption, an encoded data block. The message names what was found."""


class CorruptHFile(HoodieError):
    """An HFile's trailer, block headers, checksums, index or cells do not check out (truncated or damaged).

    The message names the offset and what was expected there.
    """


class CorruptMetadataTable(HoodieError):
    """The metadata table (``.hoodie/metadata``) holds something that does not read or does not add up."""


class RecordIndexConflict(HoodieError):
    """One update of the record index would place a record key in two file groups.

    Hudi's record index is global: one location per key. A table may hold a key in two file groups (written
    with ``insert`` or ``bulk_insert``), but no index can say where "the" record is: Hudi refuses the same
    (``HoodieTableMetadataUtil.reduceByKeys``: "Two HoodieRecord updates to the index is seen for same record
    key"; its indexer fails on such a table unless ``hoodie.hfile.writes.allow.duplicates``, which picks one
    location at random). The message names the key and both file groups."""


class SavepointRefused(HoodieError):
    """A savepoint cannot be created or deleted as asked: the time is not a completed commit, it lies before
    what the cleaner guarantees to keep, or there is no such savepoint. Nothing was written."""


class RestoreRefused(HoodieError):
    """A restore to a savepoint cannot start: no such savepoint, a later savepoint, another restore, a
    pending log compaction or a live writer stands in the way, or ``hoodie.archive.beyond.savepoint`` is set.
    The message names what blocks it; nothing of the table was changed by the refused call."""
