"""Server-rendered HTML of the dashboard. Every value goes through `esc`; the script only ever
sets `textContent`, so text from tools (a `statusMessage` of `<script>`) renders as text."""

from __future__ import annotations

import json
from datetime import datetime
from html import escape
from typing import Any

from mcptasks.dashboard.views import KINDS, ago_text, duration_text

__all__ = ["badge", "detail_page", "list_page", "login_page"]

_LABELS = {
    "working": "Working",
    "input_required": "Input required",
    "completed": "Completed",
    "tool_error": "Tool error",
    "failed": "Failed",
    "cancelled": "Cancelled",
}
_TITLES = {
    "completed": "completed without a tool error",
    "tool_error": "completed with a tool error (isError: true): the tool reported a failure",
}


def badge(kind: str) -> str:
    """A task's status badge: its status, or `tool error` (red) for a tool error."""
    return f'<span class="status s-{esc(kind)}">{esc(kind.replace("_error", " error"))}</span>'


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
 placeholder="needed to cancel or answer"></label>{_logout(base) if logout else ""}
</header>
<main>
{body}
</main>
</body>
</html>
"""


def _duration_attributes(task: dict[str, Any]) -> str:
    running = task.get("endedAt") is None
    title = "running: created to now" if running else "created to ended"
    return f' class="duration{" running" if running else ""}" title="{title}"'


def _oldest(data: dict[str, Any]) -> str:
    seconds = data.get("oldestActiveSeconds")
    return "-" if seconds is None else ago_text(seconds)


def _row(task: dict[str, Any], base: str) -> str:
    cut = task["messagePreview"] != task["statusMessage"]
    return (
        f'<tr data-task-id="{esc(task["taskId"])}" data-status="{esc(task["status"])}" data-kind="{esc(task["kind"])}">'
        f'<td class="id"><a href="{esc(base)}tasks/{esc(task["taskId"])}">{esc(task["taskId"][:12])}</a></td>'
        f"<td>{esc(task['tool'])}</td>"
        f"<td>{badge(task['kind'])}</td>"
        f'<td class="message{" cut" if cut else ""}"{_cut_title(cut)}>{esc(task["messagePreview"])}</td>'
        f'<td class="owner">{esc(task["ownerHash"])}</td>'
        f'<td class="created" title="{esc(task["createdAt"])}">{esc(ago_text(task["ageSeconds"]))}</td>'
        f"<td{_duration_attributes(task)}>{esc(duration_text(task['durationSeconds']))}</td>"
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
        f'<a class="count s-{k}" data-status="{k}" href="{esc(base)}?status={k}"'
        + (f' title="{_TITLES[k]}"' if k in _TITLES else "")
        + f'><span class="n">{_count(data["kinds"][k])}</span><span class="label">{_LABELS[k]}</span></a>'
        for k in KINDS
    )
    status_options = "".join(
        f'<option value="{k}"{" selected" if k == status else ""}>{_LABELS[k]}</option>' for k in KINDS
    )
    tool_options = "".join(
        f'<option value="{esc(t)}"{" selected" if t == tool else ""}>{esc(t)}</option>' for t in data["tools"]
    )
    rows = "".join(_row(task, base) for task in data["tasks"])
    body = f"""
<section id="counts" class="counts">{counts}</section>
<p class="facts">Total <b id="total">{data["total"]}</b> · queued <b id="queued">{data["queued"]}</b>
 · live runners <b id="runners">{data["runners"]}</b> · oldest active <b id="oldest" title="{esc(data["oldestActive"] or "")}">{esc(_oldest(data))}</b></p>
<section class="chart"><h2>Tasks per status, last hour</h2>
<svg id="chart" role="img" aria-label="tasks per status over the last hour"></svg>
<div id="legend" class="legend"></div></section>
<form id="filters" class="filters" method="get" action="{esc(base)}">
<label>Status <select name="status" id="f-status"><option value="">all</option>{status_options}</select></label>
<label>Tool <select name="tool" id="f-tool"><option value="">all</option>{tool_options}</select></label>
<label>Search <input id="f-text" type="search" placeholder="id, message, runner"></label>
<noscript><button>Filter</button></noscript>
</form>
<table id="tasks"><thead><tr><th>Task</th><th>Tool</th><th>Status</th><th>Message</th><th>Owner</th>
<th>Created</th><th>Duration</th><th>Attempt</th><th>Runner</th></tr></thead>
<tbody>{rows}</tbody></table>
<p id="more" class="more"{"" if data["more"] else " hidden"}>Showing the newest {len(data["tasks"])} tasks.</p>
<script type="application/json" id="initial">{_json_for_html(data)}</script>
"""
    return _layout(base, title, "list", refresh_ms, body, {}, logout)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _cut_title(cut: bool) -> str:
    return ' title="shortened: the task\'s page shows the whole message"' if cut else ""


def _json_for_html(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` element."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _pre(value: Any) -> str:
    return esc(json.dumps(value, indent=2, ensure_ascii=False))


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _when(task: dict[str, Any], key: str) -> str:
    """A timestamp of the task as `12 min ago (2026-12-01T10:00:00.000Z)`."""
    at = task[key]
    return f"{ago_text(_epoch(task['generatedAt']) - _epoch(at))} ({at})"


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == {} or value == []


def _field_rows(task: dict[str, Any]) -> str:
    """The task's facts as `<dt>`/`<dd>` pairs, leaving out every empty one (the same as the script's)."""
    running = task.get("endedAt") is None
    cells: list[tuple[str, str, str]] = [
        ("Task", "taskId", esc(task["taskId"])),
        ("Tool", "tool", esc(task["tool"])),
        ("Status", "status", badge(task["kind"])),
    ]
    if not _empty(task.get("statusMessage")):
        cells.append(("Message", "statusMessage", esc(task["statusMessage"])))
    cells.append(("Owner", "ownerHash", esc(task["ownerHash"])))
    cells.append(("Created", "createdAt", esc(_when(task, "createdAt"))))
    if task.get("lastUpdatedAt") and task["lastUpdatedAt"] != task["createdAt"]:
        cells.append(("Updated", "lastUpdatedAt", esc(_when(task, "lastUpdatedAt"))))
    if not running:
        cells.append(("Ended", "endedAt", esc(_when(task, "endedAt"))))
    duration = duration_text(task["durationSeconds"]) + (" (running)" if running else "")
    cells.append(("Duration", "durationSeconds", esc(duration)))
    cells.append(("Attempt", "attempt", esc(task["attempt"])))
    if not _empty(task.get("runner")):
        cells.append(("Runner", "runner", esc(task["runner"])))
    if task.get("ttlMs") is not None:
        cells.append(("Kept for", "ttlMs", esc(duration_text(task["ttlMs"] / 1000))))
    if not _empty(task.get("traceparent")):
        cells.append(("Trace", "traceparent", esc(task["traceparent"])))
    return "".join(f'<dt>{label}</dt><dd id="d-{key}">{html}</dd>' for label, key, html in cells)


def _value_text(value: Any) -> str:
    """An argument's value as text: a string as itself, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _arguments(arguments: dict[str, Any]) -> str:
    return "".join(
        f"<dt><code>{esc(name)}</code></dt><dd>{esc(_value_text(value))}</dd>"
        for name, value in arguments.items()
    )


def _history(entries: list[dict[str, Any]]) -> str:
    return "".join(
        f'<li><time title="{esc(e["at"])}">{esc(str(e["at"])[11:19])}</time> '
        f'<span class="message">{esc(e["statusMessage"])}</span></li>'
        for e in reversed(entries)
    )


def _schema_type(spec: dict[str, Any]) -> str:
    """A property's type, readably: `string (email)`, `integer 1..10`, `one of: a, b`."""
    kind = spec.get("type", "any")
    text = " | ".join(str(k) for k in kind) if isinstance(kind, list) else str(kind)
    if spec.get("format"):
        text += f" ({spec['format']})"
    choices = spec.get("enum")
    if choices is None and isinstance(spec.get("oneOf"), list):
        choices = [c.get("const") for c in spec["oneOf"] if isinstance(c, dict) and "const" in c]
    if choices:
        text += ", one of: " + ", ".join(_value_text(c) for c in choices)
    low = spec.get("minimum", spec.get("minLength"))
    high = spec.get("maximum", spec.get("maxLength"))
    if low is not None or high is not None:
        text += f", {'' if low is None else low}..{'' if high is None else high}"
    return text


def _schema_note(spec: dict[str, Any]) -> str:
    parts = [str(spec[k]) for k in ("title", "description") if spec.get(k)]
    if "default" in spec:
        parts.append(f"default: {_value_text(spec['default'])}")
    return " - ".join(parts)


def _question(key: str, request: dict[str, Any], deadline: dict[str, Any] | None = None) -> str:
    """One pending input request: its key, method, message and requested schema (or params)."""
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    assert isinstance(params, dict)
    parts = [
        f'<article class="question" data-key="{esc(key)}"><h3><code class="key">{esc(key)}</code> '
        f'<span class="method">{esc(request.get("method", "?"))}</span></h3>'
    ]
    if not _empty(params.get("message")):
        parts.append(f'<p class="q-message">{esc(params["message"])}</p>')
    schema = params.get("requestedSchema")
    if isinstance(schema, dict):
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        if properties:
            rows = "".join(
                f"<tr><td><code>{esc(name)}</code></td><td>{esc(_schema_type(spec if isinstance(spec, dict) else {}))}</td>"
                f"<td>{'required' if name in required else 'optional'}</td>"
                f"<td>{esc(_schema_note(spec if isinstance(spec, dict) else {}))}</td></tr>"
                for name, spec in properties.items()
            )
            parts.append(
                '<table class="schema"><thead><tr><th>Field</th><th>Type</th><th>Required</th>'
                f"<th>About</th></tr></thead><tbody>{rows}</tbody></table>"
            )
        else:
            parts.append('<p class="q-note">No fields: the answer is accept, decline or cancel.</p>')
    else:
        rest = {k: v for k, v in params.items() if k != "message"}
        if rest:
            parts.append(f'<pre class="q-params">{_pre(rest)}</pre>')
    if deadline:
        parts.append(
            f'<p class="q-deadline">Unless answered, its deadline answers it at <time>{esc(deadline.get("at"))}</time>: '
            f"<code>{esc(_value_text(deadline.get('answer')))}</code></p>"
        )
    parts.append(_answer_form(key, request))
    parts.append("</article>")
    return "".join(parts)


def _answer_form(key: str, request: dict[str, Any]) -> str:
    """The operator's answer form of one pending request (the script posts it with the token):
    an elicitation's content and accept, decline or cancel; any other request's raw answer."""
    if request.get("method") == "elicitation/create":
        return (
            f'<form class="answer" data-key="{esc(key)}"><label>Content (JSON) '
            '<textarea name="answer" rows="3" spellcheck="false" placeholder="{}"></textarea></label> '
            '<button type="button" data-action="accept">Accept</button> '
            '<button type="button" data-action="decline">Decline</button> '
            '<button type="button" data-action="cancel">Cancel</button></form>'
        )
    return (
        f'<form class="answer" data-key="{esc(key)}"><label>Answer (JSON, as tasks/update sends it) '
        '<textarea name="answer" rows="3" spellcheck="false"></textarea></label> '
        '<button type="button" data-action="raw">Send answer</button></form>'
    )


def _questions(requests: dict[str, Any], deadlines: dict[str, Any] | None = None) -> str:
    due = deadlines or {}
    return "".join(
        _question(str(k), v if isinstance(v, dict) else {}, due.get(k)) for k, v in requests.items()
    )


def _answers(task: dict[str, Any]) -> str:
    """Who answered each input key and when (and a deadline's time), newest last."""
    items = []
    for key, entry in (task.get("answers") or {}).items():
        who = str(entry.get("by", "?")) + (f" ({entry['name']})" if entry.get("name") else "")
        due = f" (deadline {entry['deadline']})" if entry.get("deadline") else ""
        items.append(
            f'<li data-key="{esc(key)}"><code class="key">{esc(key)}</code> '
            f'<span class="by">{esc(who)}</span> <time>{esc(entry.get("at"))}</time>{esc(due)}</li>'
        )
    return "".join(items)


def _section(name: str, heading: str, content: str, show: bool, tag: str = "div", cls: str = "") -> str:
    hidden = "" if show else " hidden"
    klass = f' class="{cls}"' if cls else ""
    return f'<section id="s-{name}"{hidden}><h2>{heading}</h2><{tag} id="{name}"{klass}>{content}</{tag}></section>'


def detail_page(
    task: dict[str, Any], *, base: str, title: str, refresh_ms: int, can_cancel: bool, logout: bool = False
) -> str:
    """One task: its (non-empty) fields, cancel button, arguments, pending questions with their
    schemas, error, recent status messages, timeline and result. Empty sections are hidden (the
    script shows them once they have something)."""
    timeline = "".join(
        f'<li><time>{esc(e["at"])}</time> <span class="status s-{esc(e["status"])}">{esc(e["status"])}</span>'
        + (
            f' <span class="message">{esc(e["statusMessage"])}</span>'
            if not _empty(e["statusMessage"])
            else ""
        )
        + "</li>"
        for e in task["timeline"]
    )
    disabled = "" if can_cancel else " disabled"
    hint = "" if can_cancel else "Cancelling is off: start the dashboard with an operator token."
    has_result = "result" in task and task["result"] is not None
    result = (
        f'<details id="result-box"{"" if has_result else " hidden"}><summary>Result</summary>'
        f'<pre id="result">{_pre(task["result"]) if has_result else ""}</pre></details>'
        if "result" in task
        else ""
    )
    arguments = task.get("arguments") or {}
    requests = task.get("inputRequests") or {}
    history = task.get("statusHistory") or []
    error = task.get("error")
    body = f"""
<p><a href="{esc(base)}">&larr; all tasks</a></p>
<h1>Task <code>{esc(task["taskId"])}</code></h1>
<dl class="fields" id="fields">{_field_rows(task)}</dl>
<p><button id="cancel" type="button"{disabled}>Cancel task</button> <span id="notice" role="status">{esc(hint)}</span></p>
{_section("inputs", "Pending questions", _questions(requests, task.get("inputDeadlines")), bool(requests))}
{_section("answers", "Answers", _answers(task), bool(task.get("answers")), "ul", "timeline answers")}
{_section("arguments", "Arguments", _arguments(arguments), bool(arguments), "dl", "fields args")}
{_section("error", "Error", _pre(error) if error is not None else "", error is not None, "pre")}
{_section("history", "Recent status messages (newest first)", _history(history), bool(history), "ol", "timeline history")}
<h2>Timeline</h2><ol id="timeline" class="timeline">{timeline}</ol>
{result}
"""
    return _layout(base, title, "detail", refresh_ms, body, {"task": task["taskId"]}, logout)


def login_page(*, base: str, title: str, next_path: str, failed: bool, retry_after: int | None = None) -> str:
    """The login form (no script): the operator token, posted to `login`, never put in a URL
    (`retry_after`: seconds the client's address must wait after too many wrong tokens)."""
    if retry_after is not None:
        notice = (
            '<p id="notice" class="error" role="alert">Too many wrong tokens from your address: '
            f"try again in {retry_after} s.</p>"
        )
    elif failed:
        notice = '<p id="notice" class="error" role="alert">That is not the operator token.</p>'
    else:
        notice = '<p id="notice" role="status">This dashboard needs the operator token to show tasks.</p>'

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
