"""The HTML status page: a pure function of the status mapping (escaping, missing keys, order by urgency, a
fleet of 10,000 tables), and the page as a browser shows it: headless Chromium renders it from a loopback
HTTP server, its screenshot is a real picture and its DOM holds what the status says."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hoodied.status_page import HISTORY_LIMIT, OVERVIEW_LIMIT, render_status_page
from support.chromium import chromium_binary, png_scanlines, run_chromium

T0 = 1_764_200_000.0  # 2025-11-26 23:33:20 UTC
SPARK_ERROR = "SparkException: Job aborted due to stage failure: executor lost"
RUNNING = "20251126232900123"  # the instant of the running compaction

#: Elements that have no end tag in HTML.
VOID = frozenset({"meta", "br", "hr", "img", "input", "link"})


class _Structure(HTMLParser):
    """Checks that every element is closed, in order; collects the text and the tags seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Structure:
    parser = _Structure()
    parser.feed(page)
    parser.close()
    assert parser.problems == []
    assert parser.stack == []
    return parser


def history(table: str, n: int, *, failing: bool = False) -> list[dict[str, object]]:
    """``n`` run records, most recent first; with ``failing`` the most recent two failed."""
    out: list[dict[str, object]] = []
    for k in range(n):
        failed = failing and k < 2
        start = T0 - 600.0 * (k + 1)
        out.append(
            {
                "table": table,
                "service": "compaction" if k % 2 == 0 else "clean",
                "instant": f"2025112623{k:02d}00000",
                "replica": "hoodied-0" if k % 3 else "hoodied-1",
                "started_at": start,
                "finished_at": start + 42.0 + k,
                "outcome": "failed" if failed else "done",
                "ok": not failed,
                "rows": 0 if failed else 1000 * (k + 1),
                "bytes": 0 if failed else 123_456 * (k + 1),
                "files": 0 if failed else k + 1,
                "error": SPARK_ERROR if failed else None,
                "seconds": 42.0 + k,
            }
        )
    return out


def realistic_status() -> dict[str, object]:
    """Three tables: one paused with a reason, one failing with an error, one busy with a running
    compaction."""
    return {
        "replica": "hoodied-0",
        "zookeeper": "CONNECTED",
        "generated_at": T0,
        "running": [
            {
                "table": "clicks",
                "action": "compaction",
                "instant": RUNNING,
                "replica": "hoodied-0",
            }
        ],
        "tables": {
            "orders": {
                "uri": "s3://warehouse/orders",
                "control": {
                    "state": "paused",
                    "by": "alice",
                    "reason": "backfill of 2025-10",
                    "at": T0 - 7200,
                },
                "priority": 1.0,
                "max_concurrent_jobs": 2,
                "poll_interval": 240.0,
                "urgency": {"compaction": 4.0, "clean": 1.5},
                "backlog": {
                    "delta_commits_since_compaction": 7,
                    "log_bytes_since_compaction": 123_456_789,
                    "commits_since_clean": 12,
                    "small_files": 40,
                    "active_timeline_instants": 55,
                    "metadata_lag_instants": 0,
                    "seconds_since_success": {"compaction": 3725.0, "clean": 120.0},
                },
                "pending": [],
                "next": {"compaction": "paused by alice: backfill of 2025-10"},
                "last_error": None,
                "schedule_error": None,
                "held": None,
                "history": history("orders", 3),
            },
            "payments": {
                "uri": "gs://ledger/payments",
                "control": {"state": "active"},
                "priority": 2.0,
                "max_concurrent_jobs": 1,
                "urgency": {"compaction": 30.0, "clustering": 2.0},
                "backlog": {
                    "delta_commits_since_compaction": 25,
                    "log_bytes_since_compaction": 9_876_543_210,
                    "commits_since_clean": 3,
                    "small_files": 250,
                    "active_timeline_instants": 80,
                    "metadata_lag_instants": 2,
                    "seconds_since_success": {"compaction": 90_000.0},
                },
                "pending": [
                    {
                        "action": "compaction",
                        "instant": "20251126224000000",
                        "state": "requested",
                        "claimed_by": None,
                    }
                ],
                "next": {
                    "compaction": "retrying after back-off: 2 failures in a row",
                    "clustering": "trigger NUM_COMMITS: 3 of 5",
                    "clean": "blocked by pending compaction 20251126224000000",
                },
                "last_error": SPARK_ERROR,
                "schedule_error": None,
                "held": None,
                "history": history("payments", 12, failing=True),
            },
            "clicks": {
                "uri": "hdfs://nn/clicks",
                "control": {"state": "active"},
                "urgency": {"compaction": 12.5, "clean": 3.0},
                "backlog": {
                    "delta_commits_since_compaction": 11,
                    "log_bytes_since_compaction": 2_000_000,
                    "seconds_since_success": {"compaction": 1800.0, "clean": 45.0},
                },
                "pending": [
                    {
                        "action": "compaction",
                        "instant": RUNNING,
                        "state": "inflight",
                        "claimed_by": "hoodied-0 (worker-7:4242)",
                    },
                    {
                        "action": "clustering",
                        "instant": "20251126233000456",
                        "state": "requested",
                        "claimed_by": "hoodied-1 (worker-8:4242)",
                    },
                ],
                "next": {"compaction": "running", "clean": "due: 12 commits since the last clean"},
                "last_error": None,
                "schedule_error": None,
                "held": None,
                "history": history("clicks", 4),
            },
        },
    }


# -- the page as a function --------------------------------------------------------------------------------


def test_realistic_page_is_a_complete_document() -> None:
    page = render_status_page(realistic_status())
    assert page.startswith("<!DOCTYPE html>")
    parsed = parse(page)
    assert "script" not in parsed.tags
    assert all(tag not in parsed.tags for tag in ("link", "img", "iframe"))  # nothing loaded from elsewhere
    text = " ".join(" ".join(parsed.text).split())
    assert "hoodied-0" in text
    assert "CONNECTED" in text
    assert "2025-11-26 23:33:20 UTC" in text
    assert "3 tables" in text
    assert "1 running job" in text
    assert "1 paused" in text
    assert "1 table with errors" in text
    assert "by alice at 2025-11-26 21:33:20 UTC: backfill of 2025-10" in text
    assert "117.7 MiB" in text  # 123,456,789 bytes
    assert "9.2 GiB" in text
    assert "1h 2m" in text  # 3,725 s
    assert "1d 1h" in text  # 90,000 s
    assert "hoodied-1 (worker-8:4242)" in text
    assert "unclaimed" in text
    assert "trigger NUM_COMMITS: 3 of 5" in text
    assert "Polled every 4m 0s" in text  # a quiet table's poll interval
    assert 'scope="col"' in page
    assert 'scope="row"' in page
    assert "<caption>" in page


def test_history_shows_the_most_recent_records_with_failures_marked() -> None:
    page = render_status_page(realistic_status())
    payments = page[page.index('<h3 id="t0h">payments') : page.index('<h3 id="t1h">')]
    assert payments.count('<tr class="failed">') == 2
    assert payments.count('<tr class="ok">') == HISTORY_LIMIT - 2
    assert "202511262309" in payments  # the tenth most recent
    assert "202511262310" not in payments  # the eleventh is left out
    assert '<td class="num">43s</td>' in payments  # the second record took 43 s


def test_every_value_is_escaped() -> None:
    evil = "<script>alert(1)</script>"
    status: dict[str, object] = {
        "replica": '"><img src=x onerror=alert(2)>',
        "zookeeper": "<b>LOST</b>",
        "running": [{"table": evil, "action": "<i>x</i>", "instant": "1&2", "replica": "<u>r</u>"}],
        "tables": {
            evil: {
                "uri": "s3://b/<script>",
                "control": {"state": "<paused>", "by": "<em>mallory</em>", "reason": "<script>x</script>"},
                "urgency": {"<svg onload=alert(3)>": 1.0},
                "backlog": {"<blink>": "<marquee>", "seconds_since_success": {"<s>": "<t>"}},
                "pending": [{"action": "<a>", "instant": "<b>", "state": "<c>", "claimed_by": "<d>"}],
                "next": {"<k>": "<v>"},
                "last_error": "Traceback <module> & 'quotes' \"double\"",
                "schedule_error": "<form>",
                "held": "<textarea>",
                "history": [{"service": "<x>", "outcome": "<failed>", "error": "</td></tr></table><h1>"}],
            }
        },
    }
    page = render_status_page(status)
    parsed = parse(page)
    allowed = {"html", "head", "meta", "title", "style", "body", "header", "main", "section", "div"}
    allowed |= {"h1", "h2", "h3", "h4", "p", "strong", "span", "a", "pre", "code", "dl", "dt", "dd"}
    allowed |= {"table", "caption", "thead", "tbody", "tr", "th", "td"}
    assert set(parsed.tags) <= allowed
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "onerror=alert" not in page.replace("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;", "")
    assert "&lt;svg onload=alert(3)&gt;" in page
    assert "Traceback &lt;module&gt; &amp; &#x27;quotes&#x27; &quot;double&quot;" in page


def test_credentials_in_uris_never_reach_the_page() -> None:
    """Whoever renders the page, a URI with credentials in it (the table's, one an error or a note quotes) is
    shown redacted."""
    status: dict[str, object] = {
        "tables": {
            "orders": {
                "uri": "s3://AKIAEXAMPLE:wJalr/K7MDENG@lake/orders",
                "last_error": "cannot list 'gs://svc:PASSWORD@bucket/orders/.hoodie': 403",
                "control": {"state": "paused", "by": "alice", "reason": "moved to s3://K2:S2@other/orders"},
                "history": [
                    {
                        "service": "clean",
                        "outcome": "failed",
                        "error": "GET abfss://c@a/t?sig=SIGNATURE failed",
                    }
                ],
            }
        }
    }
    page = render_status_page(status)
    parse(page)
    for secret in ("AKIAEXAMPLE", "wJalr", "K7MDENG", "PASSWORD", "K2:S2", "SIGNATURE"):
        assert secret not in page
    assert "<code>s3://***@lake/orders</code>" in page
    assert "gs://***@bucket/orders/.hoodie" in page
    assert "abfss://c@a/t?sig=***" in page


def test_missing_keys_and_odd_values() -> None:
    parse(render_status_page({}))
    page = render_status_page(
        {
            "tables": {
                "bare": {},
                "odd": {
                    "control": None,
                    "urgency": {"compaction": "high", "clean": float("nan"), "x": True},
                    "backlog": {"log_bytes_since_compaction": "lots", "seconds_since_success": None},
                    "pending": "not a list",
                    "next": ["not", "a", "mapping"],
                    "history": [None, "text", {}, {"started_at": 1e30, "rows": "many"}],
                },
                "not a mapping": 42,
                # the shape /status has today: pending instants as strings under their action
                "today": {"pending": {"compaction": ["20251126120000000 (requested)"], "clean": []}},
            },
            "running": [{}, "junk"],
            "generated_at": "yesterday",
        }
    )
    text = " ".join(" ".join(parse(page).text).split())
    for name in ("bare", "odd", "not a mapping", "today"):
        assert f"{name} active" in text  # its detail heading, with the default state
    assert "4 tables" in text
    assert "compaction 20251126120000000 (requested) unclaimed" in text
    assert "1 running job" in text
    assert "generated yesterday" in text
    assert "lots" in text
    assert "many" in text


def test_tables_are_ordered_by_their_highest_urgency() -> None:
    status = {
        "tables": {
            "calm": {"urgency": {"compaction": 1.0}},
            "none": {},
            "hot": {"urgency": {"compaction": 2.0, "clean": 50.0}},
            "warm": {"urgency": {"clustering": 10.0}},
            "also-warm": {"urgency": {"clean": 10.0}},
        }
    }
    page = render_status_page(status)
    headings = [page.index(f'<h3 id="t{i}h">') for i in range(5)]
    assert headings == sorted(headings)
    order = [page[h + len('<h3 id="t0h">') :].split(" ", 1)[0] for h in headings]
    assert order == ["hot", "also-warm", "warm", "calm", "none"]  # equal urgency: by name


def test_a_fleet_of_10000_tables_renders_fast_and_shows_the_most_urgent() -> None:
    tables: dict[str, object] = {}
    for n in range(10_000):
        name = f"db.table_{n:05d}"
        tables[name] = {
            "uri": f"s3://fleet/{name}",
            "control": {"state": "paused" if n % 100 == 0 else "active", "by": "ops", "reason": "migration"},
            "urgency": {"compaction": float((n * 7919) % 10_000), "clean": 1.0},
            "backlog": {"delta_commits_since_compaction": n % 50, "log_bytes_since_compaction": n * 1000},
            "pending": [{"action": "compaction", "instant": f"2025{n:013d}", "state": "requested"}],
            "next": {"compaction": "due", "clean": "not yet"},
            "last_error": "boom" if n % 250 == 0 else None,
            "history": history(name, 12, failing=n % 2 == 0),
        }
    status = {"replica": "hoodied-0", "tables": tables, "running": []}
    started = time.perf_counter()
    page = render_status_page(status)
    took = time.perf_counter() - started
    assert took < 2.0, f"10,000 tables took {took:.2f} s"
    assert page.count('<section class="table') == OVERVIEW_LIMIT
    assert "the 200 most urgent of 10,000 (9,800 more not shown)" in page
    assert "10,000 tables" in page
    assert "<strong>100</strong> paused" in page
    assert "40 tables with errors" in page
    most_urgent = max(range(10_000), key=lambda n: (n * 7919) % 10_000)  # urgency 9,999
    assert f'<h3 id="t0h">db.table_{most_urgent:05d} ' in page


# -- the page in a browser ---------------------------------------------------------------------------------


@pytest.fixture
def served_page(tmp_path: Path) -> Iterator[str]:
    """The realistic page written to a file and served from it on a free loopback port: its URL."""
    page_file = tmp_path / "status.html"
    page_file.write_text(render_status_page(realistic_status()), encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page_file.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_chromium_renders_the_page(served_page: str, tmp_path: Path) -> None:
    binary = chromium_binary()
    shot = tmp_path / "hoodied-status-page.png"
    run_chromium(
        binary, tmp_path / "profile-shot", "--window-size=1280,2000", f"--screenshot={shot}", served_page
    )
    dom = run_chromium(binary, tmp_path / "profile-dom", "--dump-dom", served_page).stdout

    if os.environ.get("HOODIED_SCREENSHOT_DIR"):
        target = Path(os.environ["HOODIED_SCREENSHOT_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target / shot.name)

    assert shot.is_file()
    width, height, rows = png_scanlines(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    # A blank (uniform) picture has at most ten distinct stored scanlines: each is fixed by its filter type
    # (five) and whether a row lies above it. Text, tables and colour make hundreds.
    distinct = len(set(rows))
    assert distinct > 100, f"the screenshot looks blank: {distinct} distinct scanlines"

    for name in ("orders", "payments", "clicks"):
        assert name in dom
    assert "paused" in dom
    assert SPARK_ERROR in dom
    assert RUNNING in dom  # the running compaction
