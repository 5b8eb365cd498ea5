"""Hudi's write-commit callback, received: writers announce each commit, and hoodied reads that table now.

A Hudi writer configured with ``hoodie.write.commit.callback.on=true`` and
``hoodie.write.commit.callback.http.url=http://<hoodied>:<metrics.port>/api/v1/commits`` POSTs, after every
ingestion commit (``HoodieWriteCommitHttpCallback``; table services announce nothing), one line of JSON
with the header ``HUDI-CALLBACK-KEY: <hoodie.write.commit.callback.http.api.key>`` and
``Content-Type: application/json``. The body (``HoodieWriteCommitCallbackMessage``, serialised by a plain
Jackson mapper) carries ``commitTime``, ``tableName``, ``basePath`` and ``hoodieWriteStat`` (the data
table's write stats); ``commitActionType`` and ``extraMetadata`` come as ``{"empty": .., "present": ..}``
(Hudi's ``Option`` serialised as a bean), so the action never arrives. Hudi sends once, never retries, and
only logs an answer of 300 or more.

**Authenticated**: the key must equal the content of ``notifications.commit_callback_key_file`` (re-read at
each call, compared in constant time; set the writers' ``...http.api.key`` to it). Without a key file the
endpoint is off (403); a missing or wrong key is 401. Hudi's default key (``hudi_write_commit_http_callback``)
is public and refused as a key file's content.

**What it does**: the announced ``basePath`` is queued (:class:`hoodied.change_events.ChangeEvents`) and the
answer is 202; the table is read at the next poll, which the event wakes. A body that is not such a message
is 400 and queues nothing. The message is a hint, never trusted for the timeline's content: the poller
lists the timeline itself.
"""

from __future__ import annotations

import hmac
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus

from hoodied.change_events import Announcement, ChangeEvents
from hoodied.control import read_token

#: The path Hudi's writers post to (``hoodie.write.commit.callback.http.url`` ends with it).
PATH = "/api/v1/commits"
#: The header Hudi's HTTP callback carries its key in (``HoodieWriteCommitHttpCallbackClient``).
KEY_HEADER = "hudi-callback-key"
#: Hudi's default key: known to everyone, so never accepted.
HUDI_DEFAULT_KEY = "hudi_write_commit_http_callback"
#: The event source name (metrics, logs).
SOURCE = "commit_callback"

_INSTANT = re.compile(r"^\d{14}(\d{3})?$")


@dataclass(frozen=True)
class CommitMessage:
    """What a callback says: the requested instant ``commit_time`` of table ``table_name`` at
    ``base_path``, and the partitions its write stats name."""

    commit_time: str
    table_name: str
    base_path: str
    partitions: tuple[str, ...] = ()


def parse_message(body: bytes) -> CommitMessage:
    """The callback message in ``body``; :class:`ValueError` saying what is wrong otherwise."""
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(value, Mapping):
        raise ValueError("the body must be a JSON object (Hudi's HoodieWriteCommitCallbackMessage)")
    fields: dict[str, str] = {}
    for name in ("commitTime", "basePath"):
        given = value.get(name)
        if not isinstance(given, str) or not given.strip():
            raise ValueError(f"{name} must be a non-empty string")
        fields[name] = given.strip()
    if not _INSTANT.match(fields["commitTime"]):
        raise ValueError(f"commitTime {fields['commitTime']!r} is not an instant time")
    if any(c in fields["basePath"] for c in "\r\n\0"):
        raise ValueError("basePath must be one line")
    table_name = value.get("tableName")
    stats = value.get("hoodieWriteStat")
    partitions: dict[str, None] = {}
    if isinstance(stats, list):
        for stat in stats:
            partition = stat.get("partitionPath") if isinstance(stat, Mapping) else None
            if isinstance(partition, str):
                partitions[partition] = None
    return CommitMessage(
        fields["commitTime"],
        table_name if isinstance(table_name, str) else "",
        fields["basePath"],
        tuple(partitions),
    )


@dataclass(frozen=True)
class Answer:
    status: HTTPStatus
    body: dict[str, object]


class CommitCallback:
    """Receives the callbacks of one daemon (module doc) into ``events``; ``key_file`` holds the key."""

    def __init__(self, events: ChangeEvents, key_file: str | None) -> None:
        self.events = events
        self.key_file = key_file

    def receive(self, headers: Mapping[str, str], body: bytes) -> Answer:
        """One POST (``headers`` with lower-case names)."""
        refusal = self._authorize(headers)
        if refusal is not None:
            return refusal
        try:
            message = parse_message(body)
        except ValueError as e:
            return Answer(HTTPStatus.BAD_REQUEST, {"error": f"not a Hudi commit callback: {e}"})
        identity = self.events.announce(
            Announcement(message.base_path, SOURCE, message.commit_time, time.time())
        )
        if identity is None:
            return Answer(HTTPStatus.BAD_REQUEST, {"error": f"basePath {message.base_path!r} names no table"})
        return Answer(HTTPStatus.ACCEPTED, {"queued": message.commit_time, "basePath": message.base_path})

    def _authorize(self, headers: Mapping[str, str]) -> Answer | None:
        try:
            expected = read_token(self.key_file)
        except ValueError:
            expected = None
        if expected is None or expected == HUDI_DEFAULT_KEY:
            return Answer(
                HTTPStatus.FORBIDDEN,
                {
                    "error": "commit callbacks are off: notifications.commit_callback_key_file is not "
                    "configured, unreadable, or holds Hudi's public default key"
                },
            )
        given = headers.get(KEY_HEADER, "")
        if not hmac.compare_digest(given.strip().encode(), expected.encode()):
            return Answer(
                HTTPStatus.UNAUTHORIZED,
                {
                    "error": "a valid key is needed (HUDI-CALLBACK-KEY: the writers' "
                    "hoodie.write.commit.callback.http.api.key)"
                },
            )
        return None


__all__ = ["HUDI_DEFAULT_KEY", "KEY_HEADER", "PATH", "SOURCE", "Answer", "CommitCallback", "CommitMessage"]
