"""S3 Event Notifications through an SQS queue: the store announces every change of a timeline folder.

The operator configures the bucket to send its object events (``s3:ObjectCreated:*``, ``s3:ObjectRemoved:*``)
to an SQS queue (``PutBucketNotificationConfiguration``; S3's filters match a key's prefix and suffix only,
so a rule per table prefix ``<table>/.hoodie/``, or suffix rules on the timeline's extensions, keep data
files out), and names the queue in ``notifications.s3_sqs``. :class:`SqsListener` long-polls the queue
(``ReceiveMessage``, up to 20 s a call: an idle fleet costs three requests a minute, whatever its size),
turns each record into the base path of the table it touched (:func:`base_path_of`: the key's part before
``.hoodie/``) and queues it (:class:`hoodied.change_events.ChangeEvents`), then deletes the messages. A
record outside a timeline (data files, the heartbeats, ``.aux``, the metadata table's own folder) is
counted and dropped; S3's ``s3:TestEvent`` is dropped silently.

Events are hints (:mod:`hoodied.change_events`): a message deleted before its table was polled, or lost,
costs the delay of the next sweep. A queue that cannot be read is retried with back-off (1 s doubling up to
a minute), each distinct failure logged once; the tables are polled by their sweeps meanwhile.

The client is boto3's: SQS needs SigV4 and, in production, the whole AWS credential chain (web identity
on EKS, container and instance credentials), which is not a thing to write by hand.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

import boto3

from hoodied.change_events import Announcement, ChangeEvents, table_prefix_of
from hoodied.queue_listener import QueueListener

logger = logging.getLogger(__name__)

SOURCE = "s3_sqs"


@dataclass(frozen=True)
class SqsSource:
    """One queue: its URL, and the region and endpoint of its SQS service (the endpoint for an
    S3-compatible store's own queue service; by default the region's)."""

    queue_url: str
    region: str | None = None
    endpoint: str | None = None
    wait_seconds: int = 20


def base_path_of(bucket: str, key: str, *, scheme: str = "s3") -> str | None:
    """The base path of the table whose timeline the object ``key`` of ``bucket`` belongs to (the key as
    an S3 event carries it: URL-encoded, ``+`` for a space), or ``None`` for any other object
    (:func:`hoodied.change_events.table_prefix_of`)."""
    base = table_prefix_of(unquote_plus(key))
    if base is None:
        return None
    return f"{scheme}://{bucket}/{base}" if base else f"{scheme}://{bucket}"


def _event_time(record: Mapping[str, Any]) -> float | None:
    raw = record.get("eventTime")
    if not isinstance(raw, str):
        return None
    try:
        when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def announcements_of(body: str, received: float) -> tuple[list[Announcement], int]:
    """The tables an SQS message's S3 event records announce, and how many records named none."""
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return [], 1
    if not isinstance(value, Mapping):
        return [], 1
    if value.get("Event") == "s3:TestEvent":
        return [], 0
    records = value.get("Records")
    if not isinstance(records, list):
        return [], 1
    out: list[Announcement] = []
    ignored = 0
    for record in records:
        s3 = record.get("s3") if isinstance(record, Mapping) else None
        bucket = s3.get("bucket", {}).get("name") if isinstance(s3, Mapping) else None
        key = s3.get("object", {}).get("key") if isinstance(s3, Mapping) else None
        path = base_path_of(bucket, key) if isinstance(bucket, str) and isinstance(key, str) else None
        if path is None:
            ignored += 1
            continue
        out.append(Announcement(path, SOURCE, None, received, _event_time(record)))
    return out, ignored


class SqsListener(QueueListener):
    """Long-polls ``source`` on a thread of its own and announces what it reads to ``events`` (module
    doc). ``client``: an SQS client (boto3's), made from ``source`` by default."""

    kind = "S3"
    thread_name = "hoodied-s3-events"
    log = logger

    def __init__(self, source: SqsSource, events: ChangeEvents, *, client: Any | None = None) -> None:
        super().__init__(source.queue_url, events)
        self.source = source
        self._client = client or boto3.client(
            "sqs", region_name=source.region, endpoint_url=source.endpoint or None
        )

    def receive_once(self) -> int:
        """One long poll: announce what came and delete it; returns the messages read."""
        answer = self._client.receive_message(
            QueueUrl=self.source.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=self.source.wait_seconds,
        )
        messages = answer.get("Messages") or []
        if not messages:
            return 0
        received = time.time()
        done: list[dict[str, str]] = []
        for i, message in enumerate(messages):
            announcements, ignored = announcements_of(str(message.get("Body", "")), received)
            self.counts["messages"] += 1
            self.counts["records_ignored"] += ignored
            if ignored:
                self.events.drop("not_a_timeline", ignored)
            for announcement in announcements:
                self.events.announce(announcement)
            done.append({"Id": str(i), "ReceiptHandle": str(message["ReceiptHandle"])})
        self._client.delete_message_batch(QueueUrl=self.source.queue_url, Entries=done)
        return len(messages)


__all__ = ["SOURCE", "SqsListener", "SqsSource", "announcements_of", "base_path_of"]
