"""The daemon's status as one HTML page (``GET /``): a pure function of the status mapping the daemon
reports at ``/status``, with no scripts and no external assets, so it works from a browser on a bastion host
as well as from ``curl``.

The page, top to bottom:

- a header: the replica, ZooKeeper's state, when the status was generated (UTC);
- a summary: tables, running jobs, paused and draining tables, tables with errors;
- the running jobs;
- an overview of the tables, most urgent first (a table's urgency is the highest of its services'), at most
  :data:`OVERVIEW_LIMIT` of them, saying how many more there are;
- a section per table in the overview: URI, control state (paused or draining stands out, with who and
  why), urgency, backlog, pending instants and who claims them, what each service does next and why, the
  errors, and the :data:`HISTORY_LIMIT` most recent runs.

Every value from the mapping is escaped: table names, URIs, errors and reasons come from configuration and
from storage. Every URI in a value is shown redacted (:func:`hoodie.storage.redact.redact_uris`:
``s3://***@bucket/t``), whoever passes the mapping: credentials an operator wrote into a table's URI, or that
an error message quotes, never reach the page. Keys may be missing and values may be of an unexpected type;
the page shows what is there and leaves out the rest. The page refreshes itself every
:data:`REFRESH_SECONDS` seconds.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape

from hoodie.storage.redact import redact_uris

#: Tables in the overview (and with a detail section): the most urgent ones.
OVERVIEW_LIMIT = 200
#: Run records shown per table, most recent first.
HISTORY_LIMIT = 10
#: Seconds between the page's own reloads.
REFRESH_SECONDS = 30

#: Outcomes shown as failures when a record has no ``ok`` of its own.
FAILED_OUTCOMES = frozenset({"failed", "claim_lost", "conflict", "unknown", "corrupt"})

#: Backlog figures in the order shown, with their labels and how each is printed.
_BACKLOG = (
    ("delta_commits_since_compaction", "Delta commits since compaction", "count"),
    ("log_bytes_since_compaction", "Log bytes since compaction", "bytes"),
    ("commits_since_clean", "Commits since clean", "count"),
    ("small_files", "Small files", "count"),
    ("active_timeline_instants", "Active timeline instants", "count"),
    ("metadata_lag_instants", "Metadata table lag (instants)", "count"),
)

_CSS = """
:root{color-scheme:light;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--head:#f6f8fa;--bad:#b42318;
--bad-bg:#fef3f2;--warn:#8a4b00;--warn-bg:#fff8e1;--ok:#116329;--ok-bg:#e6f4ea}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:#fff}
header{padding:12px 20px;background:#24292f;color:#fff}
header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#d0d7de}
main{padding:8px 20px 24px;max-width:1400px}
h2{font-size:17px;margin:20px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:0 0 6px}
a{color:#0969da}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.summary{font-size:15px;margin:12px 0}
.summary strong{font-size:16px}
table{border-collapse:collapse;margin:4px 0 10px;font-size:13px}
caption{text-align:left;font-weight:600;padding:2px 0 4px;color:var(--muted)}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top;white-space:nowrap}
thead th{background:var(--head)}
tbody th{background:var(--head);font-weight:500}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.table{border:1px solid var(--line);border-radius:6px;padding:10px 14px;margin:12px 0}
.table.has-error{border-color:var(--bad)}
.grid{display:flex;flex-wrap:wrap;align-items:flex-start;gap:0 24px}
.muted{color:var(--muted)}
.badge{display:inline-block;padding:0 7px;border-radius:10px;font-size:12px;font-weight:600;
border:1px solid currentColor}
.state-ok{color:var(--ok);background:var(--ok-bg)}
.state-warn{color:var(--warn);background:var(--warn-bg)}
.state-bad{color:var(--bad);background:var(--bad-bg)}
.note{padding:5px 10px;border-radius:4px;margin:6px 0;border-left:4px solid}
.note.warn{background:var(--warn-bg);border-color:var(--warn)}
.note.bad{background:var(--bad-bg);border-color:var(--bad);color:var(--bad)}
.note pre{margin:2px 0 0;white-space:pre-wrap;word-break:break-word}
tr.failed td{background:var(--bad-bg)}
tr.failed .outcome{color:var(--bad);font-weight:600}
.err{color:var(--bad);max-width:520px;white-space:normal;word-break:break-word}
h4{font-size:13px;margin:6px 0 2px;color:var(--muted)}
.facts{margin:0 0 4px;color:var(--muted)}
dl.next{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0 10px}
dl.next dt{font-weight:600}
dl.next dd{margin:0}
"""


# -- values ------------------------------------------------------------------------------------------------


def _esc(value: object) -> str:
    return escape(redact_uris(str(value)), quote=True)


def _number(value: object) -> float | None:
    """``value`` as a finite number, or None (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _records(value: object) -> list[Mapping[str, object]]:
    """The mappings in a list (anything else in it, or anything but a list, is left out)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        return []
    return [r for r in value if isinstance(r, Mapping)]


def _count(value: object) -> str:
    n = _number(value)
    if n is None:
        return _esc(value)
    return f"{n:,.0f}" if n == int(n) else f"{n:,.2f}".rstrip("0")


def _bytes(value: object) -> str:
    """``1536`` -> ``1.5 KiB``; anything not a number is shown as it is."""
    n = _number(value)
    if n is None:
        return _esc(value)
    if abs(n) < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if abs(n) < 1024 or unit == "TiB":
            break
    return f"{n:.1f} {unit}"


def _duration(value: object) -> str:
    """Seconds as ``42s``, ``3m 5s``, ``1h 2m``, ``2d 4h``; below ten seconds with a tenth."""
    s = _number(value)
    if s is None:
        return _esc(value)
    if s < 0:
        return "-" + _duration(-s)
    if s < 10:
        return f"{s:.1f}s"
    whole = int(s)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


def _utc(value: object) -> str:
    """A Unix time as ``2026-11-26 12:00:00 UTC``; anything else is shown as it is."""
    t = _number(value)
    if t is None:
        return _esc(value)
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return _esc(value)


def _clip(value: object, most: int = 100) -> str:
    """The first line of ``value``, cut to ``most`` characters."""
    text = str(value).strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= most and line == text else line[: most - 1] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


# -- tables ------------------------------------------------------------------------------------------------


def urgency(table: Mapping[str, object]) -> float | None:
    """A table's urgency: the highest of its services' (None when it reports none)."""
    values = [u for u in map(_number, _mapping(table.get("urgency")).values()) if u is not None]
    return max(values) if values else None


def _state(table: Mapping[str, object]) -> str:
    state = _mapping(table.get("control")).get("state")
    return state if isinstance(state, str) and state else "active"


_ERROR_KEYS = (("last_error", "Last error"), ("schedule_error", "Scheduling error"))


def _errors(table: Mapping[str, object]) -> list[tuple[str, object]]:
    return [(label, table[key]) for key, label in _ERROR_KEYS if table.get(key)]


def _failed(record: Mapping[str, object]) -> bool:
    ok = record.get("ok")
    if isinstance(ok, bool):
        return not ok
    return record.get("outcome") in FAILED_OUTCOMES


def _pending(table: Mapping[str, object]) -> list[Mapping[str, object]]:
    """The pending instants: a list of records; also a mapping of action to instants (plain strings)."""
    pending = table.get("pending")
    if isinstance(pending, Mapping):
        rows: list[Mapping[str, object]] = []
        for action, instants in pending.items():
            if isinstance(instants, Sequence) and not isinstance(instants, str):
                rows.extend(
                    i if isinstance(i, Mapping) else {"action": action, "instant": i} for i in instants
                )
        return rows
    return _records(pending)


def _most_urgent(
    tables: Mapping[str, object], limit: int
) -> list[tuple[str, Mapping[str, object], float | None]]:
    """The ``limit`` most urgent tables, most urgent first, then by name; tables without urgency last."""
    keyed = []
    for name, value in tables.items():
        table = _mapping(value)
        u = urgency(table)
        keyed.append(((0, -u, str(name)) if u is not None else (1, 0.0, str(name)), str(name), table, u))
    return [(name, table, u) for _, name, table, u in heapq.nsmallest(limit, keyed, key=lambda k: k[0])]


# -- rendering ---------------------------------------------------------------------------------------------


def _state_badge(state: str) -> str:
    kind = {"active": "state-ok", "paused": "state-warn", "draining": "state-warn"}.get(state, "state-bad")
    return f'<span class="badge {kind}">{_esc(state)}</span>'


def _zookeeper_badge(state: object) -> str:
    text = str(state)
    kind = {"CONNECTED": "state-ok", "EMBEDDED": "muted"}.get(text.upper(), "state-bad")
    return f'<span class="badge {kind}">{_esc(text)}</span>'


def _head_row(out: list[str], caption: str, columns: Iterable[str], *, css: str = "") -> None:
    attribute = f' class="{css}"' if css else ""
    out.append(f"<table{attribute}><caption>{caption}</caption><thead><tr>")
    out.extend(f'<th scope="col">{c}</th>' for c in columns)
    out.append("</tr></thead><tbody>")


def _running(out: list[str], running: list[Mapping[str, object]]) -> None:
    out.append('<section aria-labelledby="running"><h2 id="running">Running jobs</h2>')
    if not running:
        out.append('<p class="muted">No jobs running.</p></section>')
        return
    _head_row(out, _plural(len(running), "job") + " running", ("Table", "Action", "Instant", "Replica"))
    for job in running:
        out.append(
            f'<tr><th scope="row">{_esc(job.get("table", ""))}</th><td>{_esc(job.get("action", ""))}</td>'
            f'<td class="mono">{_esc(job.get("instant", ""))}</td>'
            f"<td>{_esc(job.get('replica', ''))}</td></tr>"
        )
    out.append("</tbody></table></section>")


def _overview(
    out: list[str], shown: list[tuple[str, Mapping[str, object], float | None]], total: int
) -> None:
    out.append('<section aria-labelledby="tables"><h2 id="tables">Tables</h2>')
    if not shown:
        out.append('<p class="muted">No tables.</p></section>')
        return
    caption = "Tables by urgency, most urgent first"
    if total > len(shown):
        caption += f": the {len(shown):,} most urgent of {total:,} ({total - len(shown):,} more not shown)"
    _head_row(out, caption, ("Table", "State", "Urgency", "Pending", "Errors"), css="overview")
    for i, (name, table, u) in enumerate(shown):
        errors = _errors(table)
        error_cell = (
            f'<td class="err">{"; ".join(f"{label}: {_esc(_clip(text))}" for label, text in errors)}</td>'
            if errors
            else "<td></td>"
        )
        out.append(
            f'<tr><th scope="row"><a href="#t{i}">{_esc(name)}</a></th><td>{_state_badge(_state(table))}</td>'
            f'<td class="num">{"" if u is None else f"{u:,.1f}"}</td>'
            f'<td class="num">{len(_pending(table)) or ""}</td>{error_cell}</tr>'
        )
    out.append("</tbody></table>")
    if total > len(shown):
        out.append(
            f'<p class="muted">{total - len(shown):,} less urgent tables are not shown; '
            "<code>/status</code> has them all, a page at a time (<code>?offset=</code>, "
            "<code>&amp;limit=</code>).</p>"
        )
    out.append("</section>")


def _control(out: list[str], table: Mapping[str, object]) -> None:
    control = _mapping(table.get("control"))
    state = _state(table)
    if state == "active":
        return
    parts = [f"<strong>{_esc(state.capitalize())}</strong>"]
    if control.get("by"):
        parts.append(f" by {_esc(control['by'])}")
    if control.get("at") is not None:
        parts.append(f" at {_utc(control['at'])}")
    if control.get("reason"):
        parts.append(f": {_esc(control['reason'])}")
    out.append(f'<div class="note warn" role="status">{"".join(parts)}</div>')


def _table_errors(out: list[str], table: Mapping[str, object]) -> None:
    for label, text in _errors(table):
        out.append(
            f'<div class="note bad" role="alert"><strong>{label}</strong><pre>{_esc(text)}</pre></div>'
        )
    if table.get("held"):
        out.append(f'<div class="note warn"><strong>Held</strong>: {_esc(table["held"])}</div>')


def _backlog(out: list[str], table: Mapping[str, object]) -> None:
    backlog = _mapping(table.get("backlog"))
    per_service = _mapping(table.get("urgency"))
    since = _mapping(backlog.get("seconds_since_success"))
    rows: list[str] = []
    for key, label, kind in _BACKLOG:
        if key in backlog:
            value = _bytes(backlog[key]) if kind == "bytes" else _count(backlog[key])
            rows.append(f'<tr><th scope="row">{label}</th><td class="num">{value}</td></tr>')
    known = {key for key, _, _ in _BACKLOG} | {"seconds_since_success"}
    for key, other in backlog.items():
        if key not in known:
            rows.append(f'<tr><th scope="row">{_esc(key)}</th><td class="num">{_count(other)}</td></tr>')
    for service, seconds in since.items():
        rows.append(
            f'<tr><th scope="row">Since the last {_esc(service)}</th>'
            f'<td class="num">{_duration(seconds)}</td></tr>'
        )
    if rows:
        out.append("<table><caption>Backlog</caption><tbody>")
        out.extend(rows)
        out.append("</tbody></table>")
    settings: list[str] = []
    if per_service:
        settings.extend(
            f'<tr><th scope="row">Urgency of {_esc(service)}</th><td class="num">{_count(value)}</td></tr>'
            for service, value in per_service.items()
        )
    for key, label in (("priority", "Priority"), ("max_concurrent_jobs", "Most jobs at once")):
        if key in table:
            shown = "no cap" if table[key] is None else _count(table[key])
            settings.append(f'<tr><th scope="row">{label}</th><td class="num">{shown}</td></tr>')
    if table.get("poll_interval") is not None:
        every = _duration(table["poll_interval"])
        settings.append(f'<tr><th scope="row">Polled every</th><td class="num">{every}</td></tr>')
    if settings:
        out.append("<table><caption>Urgency and limits</caption><tbody>")
        out.extend(settings)
        out.append("</tbody></table>")


def _pending_table(out: list[str], table: Mapping[str, object]) -> None:
    pending = _pending(table)
    if not pending:
        return
    _head_row(out, "Pending instants", ("Action", "Instant", "State", "Claimed by"))
    for p in pending:
        holder = p.get("claimed_by")
        claimed = _esc(holder) if holder else '<span class="muted">unclaimed</span>'
        out.append(
            f'<tr><td>{_esc(p.get("action", ""))}</td><td class="mono">{_esc(p.get("instant", ""))}</td>'
            f"<td>{_esc(p.get('state', ''))}</td><td>{claimed}</td></tr>"
        )
    out.append("</tbody></table>")


def _next(out: list[str], table: Mapping[str, object]) -> None:
    following = _mapping(table.get("next"))
    if not following:
        return
    out.append('<h4>Next</h4><dl class="next">')
    out.extend(f"<dt>{_esc(service)}</dt><dd>{_esc(why)}</dd>" for service, why in following.items())
    out.append("</dl>")


def _history(out: list[str], table: Mapping[str, object]) -> None:
    records = _records(table.get("history"))[:HISTORY_LIMIT]
    if not records:
        return
    _head_row(
        out,
        f"Recent runs (the last {_plural(len(records), 'record')}, most recent first)",
        (
            "Started",
            "Service",
            "Instant",
            "Replica",
            "Outcome",
            "Rows",
            "Bytes",
            "Files",
            "Took",
            "Error / note",
        ),
    )
    for r in records:
        if r.get("kind") == "control":  # an operator's command: who gave it and why, instead of an error
            why = f": {r['reason']}" if r.get("reason") else ""
            note = f"by {_esc(r.get('by', '?'))}{_esc(why)}"
            when = _utc(r["finished_at"]) if r.get("finished_at") is not None else ""
            out.append(
                f'<tr class="control"><td>{when}</td>'
                f'<td>{_esc(r.get("service", ""))}</td><td class="mono">{_esc(r.get("instant", ""))}</td>'
                f"<td>{_esc(r.get('replica', ''))}</td>"
                f'<td class="outcome">ctl {_esc(r.get("outcome", ""))}</td>'
                f"<td></td><td></td><td></td><td></td><td>{note}</td></tr>"
            )
            continue
        seconds = r.get("seconds")
        if seconds is None:
            start, end = _number(r.get("started_at")), _number(r.get("finished_at"))
            seconds = None if start is None or end is None else end - start
        out.append(
            f'<tr class="{"failed" if _failed(r) else "ok"}">'
            f"<td>{_utc(r['started_at']) if r.get('started_at') is not None else ''}</td>"
            f'<td>{_esc(r.get("service", ""))}</td><td class="mono">{_esc(r.get("instant", ""))}</td>'
            f'<td>{_esc(r.get("replica", ""))}</td><td class="outcome">{_esc(r.get("outcome", ""))}</td>'
            f'<td class="num">{_count(r["rows"]) if r.get("rows") is not None else ""}</td>'
            f'<td class="num">{_bytes(r["bytes"]) if r.get("bytes") is not None else ""}</td>'
            f'<td class="num">{_count(r["files"]) if r.get("files") is not None else ""}</td>'
            f'<td class="num">{_duration(seconds) if seconds is not None else ""}</td>'
            f'<td class="err">{_esc(r["error"]) if r.get("error") else ""}</td></tr>'
        )
    out.append("</tbody></table>")


def _details(out: list[str], i: int, name: str, table: Mapping[str, object], u: float | None) -> None:
    css = "table has-error" if _errors(table) else "table"
    out.append(f'<section class="{css}" id="t{i}" aria-labelledby="t{i}h">')
    out.append(f'<h3 id="t{i}h">{_esc(name)} {_state_badge(_state(table))}</h3>')
    facts = []
    if table.get("uri"):
        facts.append(f"<code>{_esc(table['uri'])}</code>")
    if u is not None:
        facts.append(f"urgency {u:,.1f}")
    if facts:
        out.append(f'<p class="facts">{" · ".join(facts)}</p>')
    _control(out, table)
    _table_errors(out, table)
    out.append('<div class="grid">')
    _backlog(out, table)
    out.append("<div>")
    _pending_table(out, table)
    _next(out, table)
    out.append("</div></div>")
    _history(out, table)
    out.append("</section>")


def render_status_page(status: Mapping[str, object], *, limit: int = OVERVIEW_LIMIT) -> str:
    """The status page: a complete HTML5 document for ``status`` (the mapping the daemon serves at
    ``/status``), showing the ``limit`` most urgent of its tables. The counts over the fleet are its
    ``summary`` (:func:`hoodied.status.summarize`: a large fleet's status holds only the tables shown),
    else counted from its tables."""
    replica = status.get("replica")
    tables = _mapping(status.get("tables"))
    running = _records(status.get("running"))
    summary = _mapping(status.get("summary"))
    counted = _mapping(summary.get("states"))
    if summary:
        total = _number(summary.get("tables")) or 0
        paused, draining = (int(_number(counted.get(s)) or 0) for s in ("paused", "draining"))
        with_errors = int(_number(summary.get("with_errors")) or 0)
    else:
        states = [_state(_mapping(t)) for t in tables.values()]
        total, paused, draining = len(tables), states.count("paused"), states.count("draining")
        with_errors = sum(1 for t in tables.values() if _errors(_mapping(t)))
    shown = _most_urgent(tables, limit)

    title = "hoodied" + (f" · {_esc(replica)}" if replica else "")
    out = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">',
        f"<title>{title}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{title}</h1><p>",
    ]
    facts = []
    if replica:
        facts.append(f"replica <strong>{_esc(replica)}</strong>")
    if status.get("zookeeper") is not None:
        facts.append(f"ZooKeeper {_zookeeper_badge(status['zookeeper'])}")
    if status.get("generated_at") is not None:
        facts.append(f"generated {_utc(status['generated_at'])}")
    out.append(" · ".join(facts))
    out.append("</p></header><main>")

    line = [
        f"<strong>{_plural(int(total), 'table')}</strong>",
        f"<strong>{_plural(len(running), 'running job')}</strong>",
        f"<strong>{paused:,}</strong> paused",
    ]
    if draining:
        line.append(f"<strong>{draining:,}</strong> draining")
    line.append(
        f"<strong{' class=err' if with_errors else ''}>{_plural(with_errors, 'table')} with errors</strong>"
    )
    out.append(f'<p class="summary" role="status">{" · ".join(line)}</p>')

    _running(out, running)
    _overview(out, shown, int(total))
    if shown:
        out.append('<section aria-labelledby="details"><h2 id="details">Table details</h2>')
        for i, (name, table, u) in enumerate(shown):
            _details(out, i, name, table, u)
        out.append("</section>")
    out.append("</main></body></html>\n")
    return "".join(out)


__all__ = ["FAILED_OUTCOMES", "HISTORY_LIMIT", "OVERVIEW_LIMIT", "render_status_page", "urgency"]
