"""The HTTP API on the metrics port (``/api/v1``, JSON) and the status page (``GET /``).

Reads are open (as ``/metrics`` and ``/status`` are); every call that changes something needs the admin
token, ``Authorization: Bearer <token>``, compared in constant time with the content of ``admin.token_file``
(re-read at each call, so a rotated Kubernetes secret takes effect without a restart). Without a token file
the API only reads (403); a missing or wrong token is 401 and changes nothing.

=======  ==========================================  ====================================================
method   path                                        what
=======  ==========================================  ====================================================
GET      ``/``                                       the HTML status page (:mod:`hoodied.status_page`)
GET      ``/api/v1/status``                          this replica's status (JSON; as ``/status``)
GET      ``/api/v1/tables``                          the tables: control state, backlog, pending, next; a
                                                     page of them (``offset``, ``limit``, ``order``, as
                                                     ``/status``: :mod:`hoodied.status`), the next in ``Link``
GET      ``/api/v1/tables/<table>``                  one table
GET      ``/api/v1/tables/<table>/history?limit=N``  the table's history, newest first
POST     ``/api/v1/tables/<table>/<command>``        pause, resume, drain, trigger, cancel, retry; body:
                                                     ``{"service", "instant", "reason", "by"}`` (JSON)
POST     ``/api/v1/commits``                         Hudi's write-commit callback (its own key, not the
                                                     admin token: :mod:`hoodied.commit_callback`)
=======  ==========================================  ====================================================

Errors are JSON ``{"error": "..."}`` with 400 (a bad command), 401, 403, 404 (no such table or path), 409
(cancel of an instant that is not pending), 503 (the pending instants cannot be read) or 500.

Rules a caller cannot get around:

- **A token file that cannot be used refuses changes** (403, logged): missing, unreadable, empty or not UTF-8
  text. An error reading the secret is never a 500 and never lets a change through.
- **A command's fields are text of one line**: ``by``, ``reason``, ``service`` and ``instant`` are strings
  without control characters (a newline, a carriage return, an escape sequence; nor Unicode's line and
  paragraph separators and invisible format characters): anything else is 400 and changes nothing. They are
  written to the log and the table's history as given, so a field must not be able to start a forged line
  there (``reason: "ok\nERROR hoodied ... table dropped"``).
- **A cancel names a service the table runs and one of its pending instants**: an unknown service is 400, an
  instant that is not pending 409; before the table's first poll its pending instants are read from the
  table, so the check never lapses.
- **Credentials inside URIs are never served**: every answer shows table URIs, and error messages quoting
  them, redacted (``s3://***@bucket/t``): JSON through :func:`hoodie.storage.redact.dumps_redacted`, the page
  by :mod:`hoodied.status_page` itself.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, unquote

from hoodie.storage.redact import dumps_redacted
from hoodied.commands import check_command, issue, pending_times
from hoodied.commit_callback import PATH as COMMIT_CALLBACK_PATH
from hoodied.commit_callback import SOURCE, CommitCallback
from hoodied.control import Command, ControlError, ControlStore, NotPending, check_one_line, read_token
from hoodied.history import read_history
from hoodied.metrics import Metrics
from hoodied.status import StatusQuery
from hoodied.status_page import HISTORY_LIMIT, OVERVIEW_LIMIT, render_status_page
from hoodied.work import WatchedTable

logger = logging.getLogger(__name__)

JSON = "application/json"
HTML = "text/html; charset=utf-8"

#: The fields of a command's body, each a string of one line (or absent).
FIELDS = ("by", "reason", "service", "instant")


@dataclass(frozen=True)
class Reply:
    status: HTTPStatus
    content_type: str
    body: bytes
    headers: Mapping[str, str] | None = None


def _json(status: HTTPStatus, value: object, headers: Mapping[str, str] | None = None) -> Reply:
    """A JSON answer; every string in it redacted (table URIs, error messages quoting them)."""
    body = dumps_redacted(value, indent=2, sort_keys=True)
    return Reply(status, JSON, body.encode(), headers)


def _error(status: HTTPStatus, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    return _json(status, {"error": message}, headers)


class Api:
    """Answers the API's requests for one daemon (see the module docstring)."""

    def __init__(
        self,
        *,
        replica: str,
        status: Callable[
            [StatusQuery], dict[str, object]
        ],  # the tables asked for, no history (hoodied.daemon)
        tables: Callable[[], list[WatchedTable]],
        store: ControlStore | None,
        token_file: str | None,
        metrics: Metrics,
        history_keep: int,
        commit_callback: CommitCallback | None = None,
        changes_at: str | None = None,
    ) -> None:
        """``changes_at``: where the control commands are taken instead (the admin server's address,
        ``admin.port``); this API then refuses them, and serves reads and the commit callback."""
        self.replica = replica
        self._changes_at = changes_at
        self._commit_callback = commit_callback
        self._status = status
        self._tables = tables
        self._store = store
        self._token_file = token_file
        self._metrics = metrics
        self._history_keep = history_keep

    def handles(self, path: str) -> bool:
        return path == "/" or path == "/api/v1" or path.startswith("/api/v1/")

    def get(self, path: str, query: str) -> Reply:
        if path == "/":
            page = render_status_page(self._page_status())  # which redacts every value it shows
            return Reply(HTTPStatus.OK, HTML, page.encode("utf-8"))
        parts = [unquote(p) for p in path.removeprefix("/api/v1").strip("/").split("/") if p]
        if parts == ["status"] or parts == ["tables"]:
            try:
                selected = StatusQuery.parse(query)  # a fleet is paged (hoodied.status)
            except ValueError as e:
                return _error(HTTPStatus.BAD_REQUEST, str(e))
            status = self._status(selected)
            if parts == ["status"]:
                return _json(HTTPStatus.OK, status)
            after = status.get("next")
            link = {"Link": f'</api/v1/tables?{after}>; rel="next"'} if isinstance(after, str) else {}
            return _json(HTTPStatus.OK, status.get("tables"), link)
        if parts[:1] != ["tables"]:
            return _error(HTTPStatus.NOT_FOUND, f"no such path: {path}")
        table = self._table(parts[1])
        if table is None:
            return _error(HTTPStatus.NOT_FOUND, f"no table {parts[1]!r}")
        if len(parts) == 2:
            tables = self._status(StatusQuery(names=frozenset({table.name}))).get("tables")
            one = dict(tables.get(table.name, {})) if isinstance(tables, Mapping) else {}
            one["history"] = [r.to_json() for r in read_history(table.storage, limit=HISTORY_LIMIT)]
            return _json(HTTPStatus.OK, one)
        if parts[2:] == ["history"]:
            limit = _limit(query)
            if limit is None:
                return _error(HTTPStatus.BAD_REQUEST, "limit must be a whole number from 1 to 10000")
            return _json(HTTPStatus.OK, [r.to_json() for r in read_history(table.storage, limit=limit)])
        return _error(HTTPStatus.NOT_FOUND, f"no such path: {path}")

    def post(self, path: str, headers: Mapping[str, str], body: bytes, client: str) -> Reply:
        if path.rstrip("/") == COMMIT_CALLBACK_PATH:
            return self._commit(headers, body, client)
        parts = [unquote(p) for p in path.removeprefix("/api/v1").strip("/").split("/") if p]
        if len(parts) != 3 or parts[0] != "tables":
            return _error(HTTPStatus.NOT_FOUND, f"no such path: {path}")
        if self._changes_at is not None:
            return _error(
                HTTPStatus.FORBIDDEN, f"changes are taken on the admin port only ({self._changes_at})"
            )
        refused = self._authorize(headers)
        if refused is not None:
            logger.warning("refused POST %r from %s: %s", path, client, refused.status.phrase)
            return refused
        table = self._table(parts[1])
        if table is None:
            return _error(HTTPStatus.NOT_FOUND, f"no table {parts[1]!r}")
        try:
            raw = json.loads(body) if body.strip() else {}
            if not isinstance(raw, Mapping):
                raise ValueError("the body must be a JSON object")
            fields = {name: _field(raw, name) for name in FIELDS}
            command = Command(
                command=parts[2],
                by=fields["by"] or f"api@{client}",
                reason=fields["reason"] or "",
                service=fields["service"],
                instant=fields["instant"],
            )
        except (ValueError, ControlError) as e:
            return _error(HTTPStatus.BAD_REQUEST, str(e))
        try:
            pending = self._pending(table) if command.command == "cancel" else None
        except Exception as e:
            logger.warning("cannot read the pending instants of table %s: %s", table.name, e)
            return _error(
                HTTPStatus.SERVICE_UNAVAILABLE, f"cannot read the pending instants of {table.name}: {e}"
            )
        try:
            check_command(table, command, pending)
        except NotPending as e:
            return _error(HTTPStatus.CONFLICT, str(e))
        except ControlError as e:
            return _error(HTTPStatus.BAD_REQUEST, str(e))
        if self._store is None:
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR, "this daemon has no control store")
        try:
            written = issue(
                self._store, table, command, replica=self.replica, history_keep=self._history_keep
            )
        except ControlError as e:
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR, str(e))
        return _json(
            HTTPStatus.OK, {"table": table.name, "command": command.command, "control": written.to_json()}
        )

    def _commit(self, headers: Mapping[str, str], body: bytes, client: str) -> Reply:
        """A Hudi writer's commit callback (:mod:`hoodied.commit_callback`)."""
        if self._commit_callback is None:
            return _error(HTTPStatus.FORBIDDEN, "commit callbacks are off on this daemon")
        answer = self._commit_callback.receive(headers, body)
        if answer.status >= HTTPStatus.BAD_REQUEST:  # (one received is counted by the poller, which takes it)
            outcome = "malformed" if answer.status == HTTPStatus.BAD_REQUEST else "refused"
            self._metrics.change_events.labels(SOURCE, outcome).inc()
            logger.warning("refused a commit callback from %s: %s", client, answer.body.get("error"))
        return _json(answer.status, answer.body)

    def _authorize(self, headers: Mapping[str, str]) -> Reply | None:
        """None when ``headers`` carry the admin token; else the refusal (see the module docstring)."""
        try:
            expected = read_token(self._token_file)
        except ValueError as e:  # not UTF-8 text (UnicodeDecodeError), a path with a NUL byte
            logger.error(
                "cannot read the admin token file %r: %s; mutating calls are refused", self._token_file, e
            )
            expected = None
        if expected is None:
            return _error(
                HTTPStatus.FORBIDDEN,
                "changes are disabled: no admin.token_file configured (or it is unreadable)",
            )
        given = headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected.encode()):
            return _error(
                HTTPStatus.UNAUTHORIZED,
                "a valid admin token is needed (Authorization: Bearer <token>)",
                {"WWW-Authenticate": 'Bearer realm="hoodied"'},
            )
        return None

    def _page_status(self) -> dict[str, object]:
        """The status of the tables the page details (the most urgent
        :data:`~hoodied.status_page.OVERVIEW_LIMIT`), with their recent history: a big fleet's page builds
        and reads a few hundred tables, not every one (the counts over all come in its ``summary``)."""
        status = self._status(StatusQuery(limit=OVERVIEW_LIMIT, order="urgency"))
        tables = status.get("tables")
        if not isinstance(tables, dict):
            return status
        by_name = {t.name: t for t in self._tables() if t.name in tables}
        for name, record in tables.items():
            watched = by_name.get(name)
            if watched is None or not isinstance(record, dict):
                continue
            try:
                record["history"] = [r.to_json() for r in read_history(watched.storage, limit=HISTORY_LIMIT)]
            except Exception as e:  # the page shows what it can
                logger.debug("cannot read the history of %s: %s", name, e)
        return status

    def _table(self, name: str) -> WatchedTable | None:
        return next((t for t in self._tables() if t.name == name), None)

    @staticmethod
    def _pending(table: WatchedTable) -> dict[str, list[str]]:
        """Per service, the instants pending on ``table``: as of the last poll (which lists every service
        with instants), or read from the table before its first poll."""
        if table.pending:
            return {s: [i.time for i in v] for s, v in table.pending.items()}
        return pending_times(table)


def _field(body: Mapping[str, object], name: str) -> str | None:
    """The body's field ``name``: None when absent or empty, else a string of one line (ValueError or
    :class:`ControlError` otherwise, naming the field and the character)."""
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {type(value).__name__}")
    check_one_line(name, value)
    return value


def _limit(query: str) -> int | None:
    values = parse_qs(query).get("limit")
    if not values:
        return 50
    try:
        n = int(values[0])
    except ValueError:
        return None
    return n if 1 <= n <= 10000 else None


__all__ = ["Api", "Reply"]
