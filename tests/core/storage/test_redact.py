"""Credentials inside URIs, redacted for display: the rule on each part of a URI, inside texts and JSON-like
values, and the daemon's log handler, which runs it on every record."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from hoodie.storage.redact import RedactUris, dumps_redacted, redact_json, redact_uri, redact_uris
from hoodied.logs import setup_logging


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        # user information: replaced whole (the key's id too)
        ("s3://KEY:SECRET@bucket/t", "s3://***@bucket/t"),
        ("s3a://AKIAEXAMPLE@bucket/t", "s3a://***@bucket/t"),
        ("gs://user:pw@bucket/a/b/", "gs://***@bucket/a/b/"),
        ("hdfs://hdfs:pw@namenode:8020/lake/t", "hdfs://***@namenode:8020/lake/t"),
        # a secret with a raw '/' (AWS's hold them) is still user information, not a host
        ("s3://AKIA:wJalr/K7MDENG/bPxR@bucket/t", "s3://***@bucket/t"),
        ("s3a://AKIA:wJalr/K7MDENG@bucket", "s3a://***@bucket"),
        # ... but a port is a port, and an '@' in a path is a path's
        ("hdfs://namenode:8020/lake/a@b", "hdfs://namenode:8020/lake/a@b"),
        ("s3://bucket/t/a@b", "s3://bucket/t/a@b"),
        # Azure: the container before '@' is a name; a password after it is not
        ("abfss://data@acct.dfs.core.windows.net/t", "abfss://data@acct.dfs.core.windows.net/t"),
        ("wasbs://data@acct.blob.core.windows.net/t", "wasbs://data@acct.blob.core.windows.net/t"),
        ("abfss://data:KEY@acct.dfs.core.windows.net/t", "abfss://***@acct.dfs.core.windows.net/t"),
        # every query value, names kept; a fragment
        (
            "abfss://data@acct.dfs.core.windows.net/t?sv=2024-01-01&se=2026&sp=rl&sig=SIGNATURE",
            "abfss://data@acct.dfs.core.windows.net/t?sv=***&se=***&sp=***&sig=***",
        ),
        ("s3://bucket/t?X-Amz-Security-Token=TOKEN&flag", "s3://bucket/t?X-Amz-Security-Token=***&***"),
        ("s3://bucket/t?empty=", "s3://bucket/t?empty="),
        ("s3://bucket/t#SECRET", "s3://bucket/t#***"),
        ("s3://K:S@bucket/t?sig=X#F", "s3://***@bucket/t?sig=***#***"),
        # nothing to redact
        ("s3://bucket/t", "s3://bucket/t"),
        ("file:///lake/t", "file:///lake/t"),
        ("/lake/t", "/lake/t"),
        ("/lake/odd?name@x:y", "/lake/odd?name@x:y"),  # a path: '?', '@' and ':' are characters of a name
        ("", ""),
    ],
)
def test_redact_uri(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown
    assert redact_uri(shown) == shown  # idempotent


def test_redact_uris_in_a_text() -> None:
    text = (
        "cannot open 's3://KEY:SECRET@bucket/t': AccessDenied; "
        'retrying "abfss://c@a.dfs.core.windows.net/t?sig=SIG" and <gs://u:p@b/x>, local /lake/t, '
        "http://127.0.0.1:9464/metrics"
    )
    assert redact_uris(text) == (
        "cannot open 's3://***@bucket/t': AccessDenied; "
        'retrying "abfss://c@a.dfs.core.windows.net/t?sig=***" and <gs://***@b/x>, local /lake/t, '
        "http://127.0.0.1:9464/metrics"
    )
    assert redact_uris("no uri here") == "no uri here"


def test_redact_json_keeps_the_shape_and_the_escapes() -> None:
    class Odd:
        def __str__(self) -> str:
            return "Odd(s3://K:S@b/t)"

    value = {
        "tables": {
            "s3://K:S@b/t": {"uri": 's3://K:S@b/t?q="1"', "n": 3, "ok": True, "x": None, "f": 1.5},
        },
        "list": ["gs://u:p@b/x", 7, ("abfss://c:k@a/t",)],
        "odd": Odd(),
        1: "s3://K:S@b/t",
    }
    assert redact_json(value) == {
        "tables": {"s3://***@b/t": {"uri": "s3://***@b/t?q=***", "n": 3, "ok": True, "x": None, "f": 1.5}},
        "list": ["gs://***@b/x", 7, ["abfss://***@a/t"]],
        "odd": "Odd(s3://***@b/t)",
        1: "s3://***@b/t",
    }
    json.dumps(redact_json(value))  # still JSON


@pytest.mark.parametrize(
    "value",
    [
        {"tables": {"t": {"uri": "s3://bucket/t", "error": None, "n": 1}}, "note": "see http://x/y"},
        ["/lake/t?odd@name#1", "no uri", 3.5],  # '@?#' without '://' before them
        {"a": 'say "s3://b/t" then ask?'},  # the '?' is in the string, after '://': walked, unchanged
    ],
)
def test_dumps_redacted_is_json_dumps_when_nothing_needs_it(value: object) -> None:
    assert dumps_redacted(value, indent=2, sort_keys=True) == json.dumps(value, indent=2, sort_keys=True)


def test_dumps_redacted_redacts_what_needs_it() -> None:
    value = {
        "uri": 's3://K:S@b/t?q="x"',  # quotes inside: escaped in JSON, the whole string is one URI
        "error": 'open "gs://u:p@b/x" failed\n',
        "s3://K:S@b/key": 1,
    }
    text = dumps_redacted(value, sort_keys=True)
    assert json.loads(text) == {
        "uri": "s3://***@b/t?q=***",
        "error": 'open "gs://***@b/x" failed\n',
        "s3://***@b/key": 1,
    }
    assert "K:S" not in text
    assert "u:p" not in text


@pytest.fixture
def daemon_log() -> Iterator[io.StringIO]:
    """The daemon's own log handler (``hoodied.logs.setup_logging``) writing to a buffer."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    stream = io.StringIO()
    handler = setup_logging("INFO", "text", stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)
        assert root.handlers == handlers


def test_the_daemons_log_handler_redacts_every_record(daemon_log: io.StringIO) -> None:
    """Whatever logger writes a URI with credentials (ours, the format library's, a client library's error
    quoting the URI, a traceback), the line shows it redacted."""
    logging.getLogger("hoodied.poller").warning("cannot poll table %s (%s)", "orders", "s3://KEY:SECRET@b/t")
    logging.getLogger("some.client").error("GET abfss://c@a.dfs.core.windows.net/t?sig=SIG failed")
    try:
        raise OSError("open 's3://AKIA:wJalr/K7MDENG@b/t/.hoodie' failed")
    except OSError:
        logging.getLogger("hoodie.storage").exception("listing failed")
    text = daemon_log.getvalue()
    for secret in ("KEY", "SECRET", "SIG", "AKIA", "wJalr", "K7MDENG"):
        assert secret not in text, text
    assert "cannot poll table orders (s3://***@b/t)" in text
    assert "?sig=***" in text
    assert "OSError: open 's3://***@b/t/.hoodie' failed" in text


def test_the_filter_leaves_other_records_alone() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "polled %d tables", (3,), None)
    assert RedactUris().filter(record)
    assert (record.msg, record.args) == ("polled %d tables", (3,))


def test_a_bad_log_call_is_left_to_the_handler_to_report() -> None:
    """Arguments that do not fit the message raise in the handler's formatting (reported by its
    ``handleError``), not in the filter, which would raise at the logging call."""
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s and %s", ("s3://K:S@b/t",), None)
    assert RedactUris().filter(record)
    with pytest.raises(TypeError):
        record.getMessage()
