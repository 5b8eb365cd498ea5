"""Azure Blob Storage events through a storage queue: the store announces every change of a timeline folder.

The operator subscribes the storage account to Event Grid (``Microsoft.Storage.BlobCreated``,
``BlobDeleted``, and on accounts with a hierarchical namespace ``BlobRenamed``), filtered on the subjects
``/blobServices/default/containers/<container>/blobs/<table>/.hoodie/``, with an Azure Storage queue as the
endpoint, and names the queue in ``notifications.azure_queues``. :class:`AzureQueueListener` reads the queue
(up to 32 messages a request; a queue has no long poll, so an empty answer waits before the next, from one
second doubling up to ``idle_wait``: an idle fleet costs one request every few seconds whatever its size),
turns each event into the base path of the table it touched (:func:`announcements_of`: the blob's path
before ``.hoodie/``, as ``abfss://<container>@<account>.dfs.<suffix>/<table>``, which is the table's identity
however its configuration spells it) and queues it (:class:`hoodied.change_events.ChangeEvents`), then
deletes the messages.

Event Grid writes each event to the queue as one message, Base64-encoded JSON by default; both schemas are
read: Event Grid's (``topic``, ``subject``, ``eventType``, ``eventTime``) and CloudEvents 1.0's (``source``,
``subject``, ``type``, ``time``), one event or a list. The account comes from the topic (or source)
``.../storageAccounts/<account>``, else from the blob's URL (``data.url``: ``https://<account>.blob...`` or
the emulator's ``http://host:port/<account>/...``). An event of another type, a blob outside a timeline, or
a message that is not an event, is counted and dropped.

Events are hints (:mod:`hoodied.change_events`): a message deleted before its table was polled, or lost,
costs the delay of the next sweep. A queue that cannot be read is retried with back-off (1 s doubling up to
a minute), each distinct failure logged once; the tables are polled by their sweeps meanwhile.

The client is Azure's (``azure-storage-queue``): Shared Key signing and the service's paging are not things
to write by hand. Credentials, in this order: a SAS in the queue URL, ``AZURE_STORAGE_CONNECTION_STRING``,
or the account key in ``AZURE_STORAGE_ACCOUNT_KEY`` (``AZURE_STORAGE_ACCESS_KEY``) for the URL's account.
Microsoft Entra ID (managed identities) would need ``azure-identity``, which hoodied does not ship: a queue
without one of the three is refused at start-up, naming them.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError
from azure.storage.queue import QueueClient

from hoodie.storage.identity import AZURE_DFS_SUFFIX
from hoodied.change_events import Announcement, ChangeEvents, table_prefix_of
from hoodied.queue_listener import QueueListener

logger = logging.getLogger(__name__)

SOURCE = "azure_queue"
#: The event types that say a blob changed.
BLOB_EVENTS = frozenset(
    {"Microsoft.Storage.BlobCreated", "Microsoft.Storage.BlobDeleted", "Microsoft.Storage.BlobRenamed"}
)
#: Messages asked for per request (the service's most).
BATCH = 32
_SUBJECT = "/blobServices/default/containers/"
#: Variables holding an account key, in the order they are read (obstore's names too).
KEY_VARIABLES = ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY")
CONNECTION_VARIABLE = "AZURE_STORAGE_CONNECTION_STRING"


class AzureQueueRefused(Exception):
    """A queue hoodied cannot read: no credentials for it, or a URL that names no queue."""


@dataclass(frozen=True)
class AzureQueueSource:
    """One queue, by its URL (``https://<account>.queue.core.windows.net/<queue>``, or the emulator's
    ``http://host:port/<account>/<queue>``; a SAS may follow), and the longest wait between two reads of it
    while it is empty."""

    queue_url: str
    idle_wait: float = 5.0


def _event_time(raw: object) -> float | None:
    if not isinstance(raw, str):
        return None
    text = raw.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # Azure writes seven digits of fraction; Python's parser takes up to six
        digits = "".join(c for c in rest if c.isdigit())
        text = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _account_and_suffix(event: Mapping[str, Any]) -> tuple[str, str]:
    """The storage account an event is about, and the ``dfs`` endpoint suffix of its cloud."""
    account = ""
    for key in ("topic", "source"):
        value = event.get(key)
        if isinstance(value, str) and "/storageAccounts/" in value:
            account = value.rsplit("/storageAccounts/", 1)[1].split("/", 1)[0]
            break
    suffix = AZURE_DFS_SUFFIX
    data = event.get("data")
    url = data.get("url") if isinstance(data, Mapping) else None
    if isinstance(url, str):
        parts = urlsplit(url)
        host = parts.hostname or ""
        name, _, domain = host.partition(".")
        if domain.startswith("blob."):
            suffix = "dfs." + domain[len("blob.") :]
            account = account or name
        elif not account:  # the emulator: the account is the path's first segment
            account = parts.path.lstrip("/").split("/", 1)[0]
    return account, suffix


def _events_of(body: str) -> list[Any] | None:
    """The events a queue message holds (Base64-encoded or raw JSON; one event or a list), or None."""
    text = body.strip()
    if not text.startswith(("{", "[")):
        try:
            text = base64.b64decode(text, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(value, Mapping):
        return [value]
    return value if isinstance(value, list) else None


def announcements_of(body: str, received: float) -> tuple[list[Announcement], int]:
    """The tables a queue message's blob events announce, and how many events named none."""
    events = _events_of(body)
    if events is None:
        return [], 1
    out: list[Announcement] = []
    ignored = 0
    for event in events:
        if not isinstance(event, Mapping):
            ignored += 1
            continue
        kind = event.get("eventType", event.get("type"))
        subject = event.get("subject")
        if kind not in BLOB_EVENTS or not isinstance(subject, str) or not subject.startswith(_SUBJECT):
            ignored += 1
            continue
        container, _, blobs = subject[len(_SUBJECT) :].partition("/blobs/")
        prefix = table_prefix_of(blobs)
        account, suffix = _account_and_suffix(event)
        if prefix is None or not container or not account:
            ignored += 1
            continue
        root = f"abfss://{container}@{account}.{suffix}"
        path = f"{root}/{prefix}" if prefix else root
        when = _event_time(event.get("eventTime", event.get("time")))
        out.append(Announcement(path, SOURCE, None, received, when))
    return out, ignored


def queue_client(source: AzureQueueSource, environ: Mapping[str, str] | None = None) -> QueueClient:
    """A client of ``source``'s queue with the first credentials found (see the module docstring);
    :class:`AzureQueueRefused` naming what was looked for when there are none."""
    env = os.environ if environ is None else environ
    parts = urlsplit(source.queue_url)
    if parts.scheme not in ("https", "http") or not parts.path.strip("/"):
        raise AzureQueueRefused(f"{source.queue_url!r} is not a queue's URL (https://<account>.queue...)")
    if parts.query:  # a SAS
        return QueueClient.from_queue_url(source.queue_url)
    segments = parts.path.strip("/").split("/")
    queue = segments[-1]
    if env.get(CONNECTION_VARIABLE):
        return QueueClient.from_connection_string(env[CONNECTION_VARIABLE], queue)
    key = next((env[v] for v in KEY_VARIABLES if env.get(v)), None)
    if key is None:
        raise AzureQueueRefused(
            f"no credentials for the queue {source.queue_url}: looked for a SAS in its URL, "
            f"{CONNECTION_VARIABLE} and {' / '.join(KEY_VARIABLES)} (Entra ID needs azure-identity, which "
            "hoodied does not ship)"
        )
    host = parts.hostname or ""
    account = segments[0] if len(segments) > 1 else host.split(".", 1)[0]
    credential = {"account_name": account, "account_key": key}
    return QueueClient.from_queue_url(source.queue_url, credential=credential)


def _one_line(error: Exception) -> str:
    """An error on one line, the same for the same cause: the service's code and the first line of its
    message (its request id and time, which change at every try, and its XML body left out)."""
    if isinstance(error, HttpResponseError):
        first = str(error.message or error.reason or "").strip().splitlines()[:1]
        code = getattr(error, "error_code", None) or ""
        return f"{type(error).__name__}: {error.status_code} {code}: {' '.join(first)}"
    return f"{type(error).__name__}: {' '.join(str(error).split())[:500]}"


class AzureQueueListener(QueueListener):
    """Reads ``source`` on a thread of its own and announces what it reads to ``events`` (module doc).
    ``client``: a queue client, made from ``source`` by default (:func:`queue_client`)."""

    kind = "Azure"
    thread_name = "hoodied-azure-events"
    log = logger

    def __init__(self, source: AzureQueueSource, events: ChangeEvents, *, client: Any | None = None) -> None:
        super().__init__(source.queue_url, events)
        self.source = source
        self._client = client if client is not None else queue_client(source)
        self._idle = 1.0

    def idle_wait(self, read: int) -> float:
        """A queue has no long poll: after an empty read, 1 s doubling up to the source's ``idle_wait``."""
        if read:
            self._idle = 1.0
            return 0.0
        wait = self._idle
        self._idle = min(self.source.idle_wait, self._idle * 2)
        return wait

    def describe_error(self, error: Exception) -> str:
        return _one_line(error)

    def receive_once(self) -> int:
        """One read of up to :data:`BATCH` messages: announce what came and delete it; returns the messages
        read."""
        messages = list(self._client.receive_messages(max_messages=BATCH, visibility_timeout=60))
        if not messages:
            return 0
        received = time.time()
        for message in messages:
            announcements, ignored = announcements_of(str(message.content or ""), received)
            self.counts["messages"] += 1
            self.counts["events_ignored"] += ignored
            if ignored:
                self.events.drop("not_a_timeline", ignored)
            for announcement in announcements:
                self.events.announce(announcement)
            self._client.delete_message(message)
        return len(messages)


__all__ = [
    "BLOB_EVENTS",
    "SOURCE",
    "AzureQueueListener",
    "AzureQueueRefused",
    "AzureQueueSource",
    "announcements_of",
    "queue_client",
]
