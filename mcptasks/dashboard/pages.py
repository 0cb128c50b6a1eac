"""Server-rendered HTML of the dashboard. Every value goes through `esc`; the script only ever
sets `textContent`, so text from tools (a `statusMessage` of `<script>`) renders as text."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from mcptasks._runtime.operator import age_text
from mcptasks.dashboard.views import STATUSES

__all__ = ["detail_page", "list_page", "login_page"]

_LABELS = {
    "working": "Working",
    "input_required": "Input required",
    "completed": "Completed",
    "failed": "Failed",
    "cancelled": "Cancelled",
}


def esc(value: object) -> str:
    """`value` as HTML text (None as an empty string)."""
    return "" if value is None else escape(str(value), quote=True)


def _logout(base: str) -> str:
    return (
        f'<form class="logout" method="post" action="{esc(base)}logout">'
        '<button type="submit">Log out</button></form>'
    )


def _layout(
    base: str, title: str, page: str, refresh_ms: int, body: str, data: dict[str, str], logout: bool
) -> str:
    attributes = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in data.items())
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<link rel="stylesheet" href="{esc(base)}static/dashboard.css">
<script src="{esc(base)}static/dashboard.js" defer></script>
</head>
<body data-page="{esc(page)}" data-base="{esc(base)}" data-refresh="{refresh_ms}"{attributes}>
<header>
<a class="brand" href="{esc(base)}">{esc(title)}</a>
<span id="live" class="live" title="time of the last refresh">server-rendered</span>
<label class="token">Operator token <input id="token" type="password" autocomplete="off"
 placeholder="needed to cancel"></label>{_logout(base) if logout else ""}
</header>
<main>
{body}
</main>
</body>
</html>
"""


def _row(task: dict[str, Any], base: str) -> str:
    return (
        f'<tr data-task-id="{esc(task["taskId"])}" data-status="{esc(task["status"])}">'
        f'<td class="id"><a href="{esc(base)}tasks/{esc(task["taskId"])}">{esc(task["taskId"][:12])}</a></td>'
        f"<td>{esc(task['tool'])}</td>"
        f'<td><span class="status s-{esc(task["status"])}">{esc(task["status"])}</span></td>'
        f'<td class="message">{esc(task["statusMessage"])}</td>'
        f'<td class="owner">{esc(task["ownerHash"])}</td>'
        f"<td>{esc(age_text(task['ageSeconds']))}</td>"
        f"<td>{esc(task['attempt'])}</td>"
        f'<td class="runner">{esc(task["runner"] or "-")}</td>'
        "</tr>"
    )


def list_page(
    data: dict[str, Any],
    *,
    base: str,
    title: str,
    refresh_ms: int,
    status: str,
    tool: str,
    logout: bool = False,
) -> str:
    """The overview: status counts, the chart, the filter form and the task table (`logout`: show
    the log-out button)."""
    counts = "".join(
        f'<a class="count s-{s}" data-status="{s}" href="{esc(base)}?status={s}">'
        f'<span class="n">{data["counts"][s]}</span><span class="label">{_LABELS[s]}</span></a>'
        for s in STATUSES
    )
    status_options = "".join(
        f'<option value="{s}"{" selected" if s == status else ""}>{_LABELS[s]}</option>' for s in STATUSES
    )
    tool_options = "".join(
        f'<option value="{esc(t)}"{" selected" if t == tool else ""}>{esc(t)}</option>' for t in data["tools"]
    )
    rows = "".join(_row(task, base) for task in data["tasks"])
    body = f"""
<section id="counts" class="counts">{counts}</section>
<p class="facts">Total <b id="total">{data["total"]}</b> · queued <b id="queued">{data["queued"]}</b>
 · live runners <b id="runners">{data["runners"]}</b> · oldest active <b id="oldest">{esc(data["oldestActive"] or "-")}</b></p>
<section class="chart"><h2>Tasks per status, last hour</h2>
<svg id="chart" viewBox="0 0 600 160" role="img" aria-label="tasks per status over the last hour"></svg>
<div id="legend" class="legend"></div></section>
<form id="filters" class="filters" method="get" action="{esc(base)}">
<label>Status <select name="status" id="f-status"><option value="">all</option>{status_options}</select></label>
<label>Tool <select name="tool" id="f-tool"><option value="">all</option>{tool_options}</select></label>
<label>Search <input id="f-text" type="search" placeholder="id, message, runner"></label>
<noscript><button>Filter</button></noscript>
</form>
<table id="tasks"><thead><tr><th>Task</th><th>Tool</th><th>Status</th><th>Message</th><th>Owner</th>
<th>Age</th><th>Attempt</th><th>Runner</th></tr></thead>
<tbody>{rows}</tbody></table>
<p id="more" class="more"{"" if data["more"] else " hidden"}>Showing the newest {len(data["tasks"])} tasks.</p>
<script type="application/json" id="initial">{_json_for_html(data)}</script>
"""
    return _layout(base, title, "list", refresh_ms, body, {}, logout)


def _json_for_html(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` element."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _pre(value: Any) -> str:
    return esc(json.dumps(value, indent=2, ensure_ascii=False))


def detail_page(
    task: dict[str, Any], *, base: str, title: str, refresh_ms: int, can_cancel: bool, logout: bool = False
) -> str:
    """One task: its fields, cancel button, timeline, input requests, error and result."""
    fields = [
        ("Task", "taskId"),
        ("Tool", "tool"),
        ("Status", "status"),
        ("Message", "statusMessage"),
        ("Owner", "ownerHash"),
        ("Created", "createdAt"),
        ("Updated", "lastUpdatedAt"),
        ("Attempt", "attempt"),
        ("Runner", "runner"),
    ]
    rows = "".join(f'<dt>{label}</dt><dd id="d-{key}">{esc(task.get(key))}</dd>' for label, key in fields)
    timeline = "".join(
        f'<li><time>{esc(e["at"])}</time> <span class="status s-{esc(e["status"])}">{esc(e["status"])}</span>'
        f' <span class="message">{esc(e["statusMessage"])}</span></li>'
        for e in task["timeline"]
    )
    disabled = "" if can_cancel else " disabled"
    hint = "" if can_cancel else "Cancelling is off: start the dashboard with an operator token."
    result = (
        f'<details id="result-box"><summary>Result</summary><pre id="result">{_pre(task["result"])}</pre></details>'
        if "result" in task
        else ""
    )
    body = f"""
<p><a href="{esc(base)}">&larr; all tasks</a></p>
<h1>Task <code>{esc(task["taskId"])}</code></h1>
<dl class="fields">{rows}</dl>
<p><button id="cancel" type="button"{disabled}>Cancel task</button> <span id="notice" role="status">{esc(hint)}</span></p>
<h2>Timeline</h2><ol id="timeline" class="timeline">{timeline}</ol>
<h2>Input requests</h2><pre id="inputs">{_pre(task["inputRequests"])}</pre>
<h2>Error</h2><pre id="error">{_pre(task["error"])}</pre>
{result}
"""
    return _layout(base, title, "detail", refresh_ms, body, {"task": task["taskId"]}, logout)


def login_page(*, base: str, title: str, next_path: str, failed: bool) -> str:
    """The login form (no script): the operator token, posted to `login`, never put in a URL."""
    notice = (
        '<p id="notice" class="error" role="alert">That is not the operator token.</p>'
        if failed
        else '<p id="notice" role="status">This dashboard needs the operator token to show tasks.</p>'
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} - log in</title>
<link rel="stylesheet" href="{esc(base)}static/dashboard.css">
</head>
<body data-page="login" data-base="{esc(base)}">
<header>
<a class="brand" href="{esc(base)}">{esc(title)}</a>
</header>
<main>
<h1>Log in</h1>
{notice}
<form id="login" class="login" method="post" action="{esc(base)}login">
<input type="hidden" name="next" value="{esc(next_path)}">
<label>Operator token <input id="login-token" name="token" type="password" autocomplete="current-password"
 required autofocus></label>
<button type="submit">Log in</button>
</form>
</main>
</body>
</html>
"""
