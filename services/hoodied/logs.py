"""Structured logs: every line says which table and instant it is about.

The supervisor and the services wrap work in :func:`log_context` (``table=``, ``action=``, ``instant=``...);
:class:`ContextFilter`, on the handler :func:`setup_logging` installs, copies those fields onto every record
that reaches it, from any logger (``hoodied.*``, the format library's ``hoodie.*``, third parties). The
fields live in a :mod:`contextvars` variable: each thread starts with none, and a thread gets the caller's
only when started in a copy of its context (``contextvars.copy_context().run``).

Two formats, one line per record:

- ``text``: ``2026-11-23T10:00:00.123Z INFO hoodied.supervisor [table=orders action=compaction
  instant=20261123093000000] message`` (one line here; the brackets are left out when there are no fields,
  a traceback follows on the next lines);
- ``json``: ``{"ts": ..., "level": ..., "logger": ..., "msg": ..., <fields>, "exc_info": <traceback>}``.

Times are UTC with milliseconds.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Final, TextIO

from hoodie.storage.redact import RedactUris

#: Third-party loggers that say too much at INFO, and the level :func:`setup_logging` gives them.
NOISY_LOGGERS: Final[Mapping[str, int]] = MappingProxyType(
    {"kazoo.client": logging.WARNING, "py4j": logging.WARNING, "apscheduler": logging.WARNING}
)

LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS: Final = ("text", "json")

#: Names a context field cannot take: attributes of a log record, and the keys of the JSON line.
RESERVED_FIELDS: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "hoodied",
    "ts",
    "level",
    "logger",
}

_EMPTY: Mapping[str, str] = MappingProxyType({})
_FIELDS: ContextVar[Mapping[str, str]] = ContextVar("hoodied_log_fields", default=_EMPTY)


@contextmanager
def log_context(**fields: str) -> Iterator[Mapping[str, str]]:
    """Add ``fields`` to every log line emitted in the ``with`` block (in this thread, and in threads run in
    a copy of this context). Nested contexts merge, the inner value of a field winning; on exit the fields
    are what they were before. Yields the fields now in effect.

    Raises ValueError for a field named like a log record attribute (:data:`RESERVED_FIELDS`)."""
    reserved = sorted(RESERVED_FIELDS.intersection(fields))
    if reserved:
        raise ValueError(f"log_context: reserved field name(s) {reserved}")
    merged = MappingProxyType({**_FIELDS.get(), **{k: str(v) for k, v in fields.items()}})
    token = _FIELDS.set(merged)
    try:
        yield merged
    finally:
        _FIELDS.reset(token)


def current_fields() -> Mapping[str, str]:
    """The context fields in effect here (read-only)."""
    return _FIELDS.get()


class ContextFilter(logging.Filter):
    """Puts the context fields on each record: as the dict ``record.hoodied`` and one attribute each (so
    ``%(table)s`` works in a plain format string). A field given explicitly (``extra=``) wins. Attach it to a
    handler, so that it sees the records of every logger that propagate there."""

    def filter(self, record: logging.LogRecord) -> bool:
        if hasattr(record, "hoodied"):  # seen by another handler already
            return True
        fields = _FIELDS.get()
        merged = {k: str(record.__dict__.get(k, v)) for k, v in fields.items()}
        record.hoodied = merged
        for k, v in merged.items():
            record.__dict__.setdefault(k, v)
        return True


def _fields_of(record: logging.LogRecord) -> Mapping[str, str]:
    fields = getattr(record, "hoodied", None)
    return fields if isinstance(fields, Mapping) else _FIELDS.get()


def _utc_time(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


def _text_value(value: str) -> str:
    if not value or any(c.isspace() or c in '"=[]' for c in value):
        return json.dumps(value, ensure_ascii=False)
    return value


class TextFormatter(logging.Formatter):
    """``<UTC time> <LEVEL> <logger> [k=v ...] <message>``, then the traceback, if any, on its own lines."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        fields = _fields_of(record)
        context = " ".join(f"{k}={_text_value(v)}" for k, v in fields.items())
        parts = [_utc_time(record), record.levelname, record.name]
        if context:
            parts.append(f"[{context}]")
        parts.append(record.message)
        line = " ".join(parts)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``msg``, the context fields, and
    ``exc_info`` (the traceback text) and ``stack_info`` when present."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "ts": _utc_time(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_fields_of(record))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc_info"] = record.exc_text
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


class _HoodiedHandler(logging.StreamHandler[TextIO]):
    """The handler :func:`setup_logging` installs on the root logger (its type marks it for replacing)."""


_setup_lock = threading.Lock()


def setup_logging(
    level: str = "INFO", fmt: str = "text", stream: TextIO | None = None, *, quiet: bool = True
) -> logging.Handler:
    """Send every log record at ``level`` or above to ``stream`` (default: standard error) in format ``fmt``
    (``text`` or ``json``), with the context fields. Configures the root logger; calling it again replaces
    the handler it installed before and leaves other handlers alone. With ``quiet`` the loggers of
    :data:`NOISY_LOGGERS` log at WARNING (or ``level`` when higher). Returns the handler installed.

    Raises ValueError naming a bad ``level`` or ``fmt``."""
    name = str(level).upper()
    if name not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(LEVELS)}")
    if fmt == "text":
        formatter: logging.Formatter = TextFormatter()
    elif fmt == "json":
        formatter = JsonFormatter()
    else:
        raise ValueError(f"unknown log format {fmt!r}; expected one of {', '.join(FORMATS)}")
    levelno = logging.getLevelNamesMapping()[name]

    handler = _HoodiedHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactUris())  # credentials inside URIs (s3://KEY:SECRET@bucket) never reach a log
    root = logging.getLogger()
    with _setup_lock:
        for old in [h for h in root.handlers if isinstance(h, _HoodiedHandler)]:
            root.removeHandler(old)
            old.close()
        root.addHandler(handler)
        root.setLevel(levelno)
        if quiet:
            for logger_name, noisy_level in NOISY_LOGGERS.items():
                logging.getLogger(logger_name).setLevel(max(noisy_level, levelno))
    return handler


__all__ = [
    "FORMATS",
    "LEVELS",
    "NOISY_LOGGERS",
    "RESERVED_FIELDS",
    "ContextFilter",
    "JsonFormatter",
    "TextFormatter",
    "current_fields",
    "log_context",
    "setup_logging",
]
