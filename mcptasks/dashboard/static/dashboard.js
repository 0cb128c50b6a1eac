// mcptasks dashboard: live updates by polling the JSON API. Text is only ever set with
// textContent, never parsed as HTML.
(function () {
  "use strict";
  var body = document.body;
  var base = body.dataset.base;
  var refresh = Number(body.dataset.refresh) || 2000;
  // the statuses, with "completed" split: a tool error (isError: true) is shown apart
  var KINDS = ["working", "input_required", "completed", "tool_error", "failed", "cancelled"];
  var COLORS = { working: "#2f6fde", input_required: "#d98c00", completed: "#2e9d4f", tool_error: "#c2185b", failed: "#d23c3c", cancelled: "#8a8a8a" };
  var tokenInput = document.getElementById("token");
  var live = document.getElementById("live");

  try { tokenInput.value = sessionStorage.getItem("mcptasks-token") || ""; } catch (e) { /* storage off */ }
  tokenInput.addEventListener("input", function () {
    try { sessionStorage.setItem("mcptasks-token", tokenInput.value); } catch (e) { /* storage off */ }
  });

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  var UNITS = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];

  function duration(seconds) {  // the same format as the server's duration_text
    var s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + " s";
    for (var i = 0; i < UNITS.length - 1; i++) {
      if (s >= UNITS[i][0]) {
        var rest = Math.floor((s % UNITS[i][0]) / UNITS[i + 1][0]);
        return Math.floor(s / UNITS[i][0]) + " " + UNITS[i][1] + (rest ? " " + rest + " " + UNITS[i + 1][1] : "");
      }
    }
    return s + " s";
  }

  function ago(seconds) {  // the same format as the server's ago_text
    var s = Math.max(0, Math.floor(seconds));
    if (s < 1) return "just now";
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    return duration(s - (s % 60)) + " ago";
  }

  function empty(value) {
    if (value === null || value === undefined || value === "") return true;
    if (Array.isArray(value)) return value.length === 0;
    return typeof value === "object" && Object.keys(value).length === 0;
  }

  function valueText(value) { return typeof value === "string" ? value : JSON.stringify(value); }

  function statusBadge(kind) { return el("span", kind.replace("_error", " error"), "status s-" + kind); }

  function getJSON(url) {
    return fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" }).then(function (r) {
      if (r.status === 401) location.reload();  // the login ended: the page shows the login form
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    });
  }

  function markLive(ok, when) {
    live.textContent = ok ? "live · " + when : "offline · retrying";
    live.className = ok ? "live ok" : "live down";
  }

  function schedule(fn) { setTimeout(fn, refresh); }

  // -- overview --------------------------------------------------------------------------------

  function niceStep(max) {  // a step of 1, 2 or 5 times a power of ten giving at most 5 ticks
    var step = 1;
    for (var power = 1; ; power *= 10) {
      var found = [1, 2, 5].some(function (m) { step = m * power; return max / step <= 5; });
      if (found) return step;
    }
  }

  function clock(iso) {  // HH:MM in the browser's time zone
    var d = new Date(iso);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return two(d.getHours()) + ":" + two(d.getMinutes());
  }

  function renderChart(chart) {
    var svg = document.getElementById("chart");
    var ns = "http://www.w3.org/2000/svg";
    function node(tag, attributes, text) {
      var n = document.createElementNS(ns, tag);
      Object.keys(attributes).forEach(function (k) { n.setAttribute(k, String(attributes[k])); });
      if (text !== undefined) n.textContent = text;
      svg.appendChild(n);
      return n;
    }
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var width = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 600);
    var height = Math.max(120, Math.round(svg.getBoundingClientRect().height) || 200);
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    var left = 44, right = 8, top = 10, bottom = 24;
    var plotW = width - left - right, plotH = height - top - bottom;
    var n = chart.times.length;
    var totals = chart.times.map(function (_, i) {
      return KINDS.reduce(function (sum, s) { return sum + chart.series[s][i]; }, 0);
    });
    var step = niceStep(Math.max(1, Math.max.apply(null, totals)));
    var top_ = step * Math.max(1, Math.ceil(Math.max.apply(null, totals) / step));
    for (var tick = 0; tick <= top_; tick += step) {
      var ty = top + plotH - (tick / top_) * plotH;
      node("line", { x1: left, x2: width - right, y1: ty, y2: ty, class: tick ? "grid" : "axis" });
      node("text", { x: left - 6, y: ty + 4, "text-anchor": "end", class: "y-tick" }, String(tick));
    }
    node("line", { x1: left, x2: left, y1: top, y2: top + plotH, class: "axis" });
    node("text", { x: 12, y: top + plotH / 2, transform: "rotate(-90 12 " + (top + plotH / 2) + ")", "text-anchor": "middle", class: "y-title" }, "tasks");
    var slot = plotW / n, gap = Math.min(8, slot * 0.2), bar = slot - gap;
    var every = Math.max(1, Math.ceil(44 / slot));
    for (var i = 0; i < n; i++) {
      var x = left + i * slot + gap / 2, y = top + plotH;
      KINDS.forEach(function (s) {
        var v = chart.series[s][i];
        if (!v) return;
        var h = (v / top_) * plotH;
        y -= h;
        var rect = node("rect", { x: x, y: y, width: bar, height: h, fill: COLORS[s], "data-status": s });
        var title = document.createElementNS(ns, "title");
        title.textContent = clock(chart.times[i]) + " " + s + ": " + v;
        rect.appendChild(title);
      });
      if (i === n - 1 || ((n - 1 - i) % every === 0 && n - 1 - i >= every)) {
        node("text", { x: x + bar / 2, y: height - 6, "text-anchor": "middle", class: "x-tick" },
          i === n - 1 ? "now" : clock(chart.times[i]));
      }
    }
    var legend = document.getElementById("legend");
    legend.textContent = "";
    KINDS.forEach(function (s) {
      legend.appendChild(el("span", s.replace("_error", " error"), "key s-" + s));
    });
  }

  function renderRows(tasks) {
    var tbody = document.querySelector("#tasks tbody");
    var text = document.getElementById("f-text").value.trim().toLowerCase();
    var fragment = document.createDocumentFragment();
    tasks.forEach(function (t) {
      var haystack = [t.taskId, t.tool, t.statusMessage || "", t.runner || "", t.ownerHash].join(" ").toLowerCase();
      if (text && haystack.indexOf(text) < 0) return;
      var tr = el("tr");
      tr.dataset.taskId = t.taskId;
      tr.dataset.status = t.status;
      tr.dataset.kind = t.kind;
      var idCell = el("td", null, "id");
      var link = el("a", t.taskId.slice(0, 12));
      link.href = base + "tasks/" + encodeURIComponent(t.taskId);
      idCell.appendChild(link);
      tr.appendChild(idCell);
      tr.appendChild(el("td", t.tool));
      var statusCell = el("td");
      statusCell.appendChild(statusBadge(t.kind));
      tr.appendChild(statusCell);
      var cut = t.messagePreview !== t.statusMessage;  // a long or multi-line message, shortened
      var message = el("td", t.messagePreview || "", cut ? "message cut" : "message");
      if (cut) message.title = "shortened: the task's page shows the whole message";
      tr.appendChild(message);
      tr.appendChild(el("td", t.ownerHash, "owner"));
      var created = el("td", ago(t.ageSeconds), "created");
      created.title = t.createdAt;
      tr.appendChild(created);
      var running = t.endedAt === null || t.endedAt === undefined;
      var lasted = el("td", duration(t.durationSeconds), running ? "duration running" : "duration");
      lasted.title = running ? "running: created to now" : "created to ended";
      tr.appendChild(lasted);
      tr.appendChild(el("td", t.attempt));
      tr.appendChild(el("td", t.runner || "-", "runner"));
      fragment.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(fragment);
  }

  function renderSummary(data) {
    KINDS.forEach(function (s) {
      var n = data.kinds[s];
      document.querySelector('.count[data-status="' + s + '"] .n').textContent = n === null || n === undefined ? "-" : String(n);
    });
    document.getElementById("total").textContent = String(data.total);
    document.getElementById("queued").textContent = String(data.queued);
    document.getElementById("runners").textContent = String(data.runners);
    var oldest = document.getElementById("oldest");
    oldest.textContent = data.oldestActiveSeconds === null || data.oldestActiveSeconds === undefined ? "-" : ago(data.oldestActiveSeconds);
    oldest.title = data.oldestActive || "";
    var toolSelect = document.getElementById("f-tool");
    var known = Array.prototype.map.call(toolSelect.options, function (o) { return o.value; });
    data.tools.forEach(function (tool) {
      if (known.indexOf(tool) < 0) {
        var option = el("option", tool);
        option.value = tool;
        toolSelect.appendChild(option);
      }
    });
    document.getElementById("more").hidden = !data.more;
    renderRows(data.tasks);
    renderChart(data.chart);
  }

  var latest = null;

  function filterQuery() {
    var params = new URLSearchParams();
    var status = document.getElementById("f-status").value;
    var tool = document.getElementById("f-tool").value;
    if (status) params.set("status", status);
    if (tool) params.set("tool", tool);
    return params.toString();
  }

  function loadSummary(once) {
    var query = filterQuery();
    getJSON(base + "api/summary" + (query ? "?" + query : "")).then(function (data) {
      latest = data;
      renderSummary(data);
      markLive(true, data.generatedAt.slice(11, 19));
      body.dataset.updates = String(Number(body.dataset.updates || "0") + 1);
    }).catch(function () { markLive(false); }).then(function () { if (!once) schedule(function () { loadSummary(false); }); });
  }

  function startOverview() {
    var initial = document.getElementById("initial");
    if (initial) {
      latest = JSON.parse(initial.textContent);
      renderChart(latest.chart);
    }
    var form = document.getElementById("filters");
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    ["f-status", "f-tool"].forEach(function (id) {
      document.getElementById(id).addEventListener("change", function () {
        var query = filterQuery();
        history.replaceState(null, "", base + (query ? "?" + query : ""));
        loadSummary(true);
      });
    });
    document.getElementById("f-text").addEventListener("input", function () { if (latest) renderRows(latest.tasks); });
    window.addEventListener("resize", function () { if (latest) renderChart(latest.chart); });
    schedule(function () { loadSummary(false); });
  }

  // -- one task --------------------------------------------------------------------------------

  function when(task, key) {  // the same as the server's: "12 min ago (ISO)"
    return ago((Date.parse(task.generatedAt) - Date.parse(task[key])) / 1000) + " (" + task[key] + ")";
  }

  function renderFields(task) {  // the same fields as the server's, leaving out empty ones
    var running = task.endedAt === null || task.endedAt === undefined;
    var cells = [["Task", "taskId", task.taskId], ["Tool", "tool", task.tool], ["Status", "status", statusBadge(task.kind)]];
    if (!empty(task.statusMessage)) cells.push(["Message", "statusMessage", task.statusMessage]);
    cells.push(["Owner", "ownerHash", task.ownerHash]);
    cells.push(["Created", "createdAt", when(task, "createdAt")]);
    if (task.lastUpdatedAt && task.lastUpdatedAt !== task.createdAt) cells.push(["Updated", "lastUpdatedAt", when(task, "lastUpdatedAt")]);
    if (!running) cells.push(["Ended", "endedAt", when(task, "endedAt")]);
    cells.push(["Duration", "durationSeconds", duration(task.durationSeconds) + (running ? " (running)" : "")]);
    cells.push(["Attempt", "attempt", task.attempt]);
    if (!empty(task.runner)) cells.push(["Runner", "runner", task.runner]);
    if (task.ttlMs !== null && task.ttlMs !== undefined) cells.push(["Kept for", "ttlMs", duration(task.ttlMs / 1000)]);
    if (!empty(task.traceparent)) cells.push(["Trace", "traceparent", task.traceparent]);
    var dl = document.getElementById("fields");
    dl.textContent = "";
    cells.forEach(function (cell) {
      dl.appendChild(el("dt", cell[0]));
      var dd = el("dd");
      dd.id = "d-" + cell[1];
      if (cell[2] instanceof Node) dd.appendChild(cell[2]); else dd.textContent = String(cell[2]);
      dl.appendChild(dd);
    });
  }

  function show(name, visible) { document.getElementById("s-" + name).hidden = !visible; }

  function schemaType(spec) {  // the same as the server's _schema_type
    var kind = spec.type === undefined ? "any" : spec.type;
    var text = Array.isArray(kind) ? kind.join(" | ") : String(kind);
    if (spec.format) text += " (" + spec.format + ")";
    var choices = spec.enum;
    if ((choices === undefined || choices === null) && Array.isArray(spec.oneOf)) {
      choices = spec.oneOf.filter(function (c) { return c && typeof c === "object" && "const" in c; }).map(function (c) { return c.const; });
    }
    if (choices && choices.length) text += ", one of: " + choices.map(valueText).join(", ");
    var low = spec.minimum !== undefined ? spec.minimum : spec.minLength;
    var high = spec.maximum !== undefined ? spec.maximum : spec.maxLength;
    if ((low !== undefined && low !== null) || (high !== undefined && high !== null)) {
      text += ", " + (low === undefined || low === null ? "" : low) + ".." + (high === undefined || high === null ? "" : high);
    }
    return text;
  }

  function schemaNote(spec) {
    var parts = ["title", "description"].filter(function (k) { return spec[k]; }).map(function (k) { return String(spec[k]); });
    if ("default" in spec) parts.push("default: " + valueText(spec.default));
    return parts.join(" - ");
  }

  function answerForm(key, request) {
    var form = el("form", null, "answer");
    form.dataset.key = key;
    var label = el("label", request.method === "elicitation/create" ? "Content (JSON) " : "Answer (JSON, as tasks/update sends it) ");
    var area = el("textarea");
    area.name = "answer";
    area.rows = 3;
    area.spellcheck = false;
    if (request.method === "elicitation/create") area.placeholder = "{}";
    label.appendChild(area);
    form.appendChild(label);
    var actions = request.method === "elicitation/create"
      ? [["accept", "Accept"], ["decline", "Decline"], ["cancel", "Cancel"]]
      : [["raw", "Send answer"]];
    actions.forEach(function (pair) {
      form.appendChild(document.createTextNode(" "));
      var button = el("button", pair[1]);
      button.type = "button";
      button.dataset.action = pair[0];
      form.appendChild(button);
    });
    return form;
  }

  function renderQuestions(requests, deadlines) {
    var box = document.getElementById("inputs");
    var signature = JSON.stringify([requests || {}, deadlines || {}]);
    if (box.dataset.signature === signature) return;  // keep what an operator is typing
    box.dataset.signature = signature;
    box.textContent = "";
    Object.keys(requests || {}).forEach(function (key) {
      var request = requests[key] && typeof requests[key] === "object" ? requests[key] : {};
      var params = request.params && typeof request.params === "object" ? request.params : {};
      var article = el("article", null, "question");
      article.dataset.key = key;
      var h3 = el("h3");
      h3.appendChild(el("code", key, "key"));
      h3.appendChild(document.createTextNode(" "));
      h3.appendChild(el("span", request.method || "?", "method"));
      article.appendChild(h3);
      if (!empty(params.message)) article.appendChild(el("p", params.message, "q-message"));
      var schema = params.requestedSchema;
      if (schema && typeof schema === "object") {
        var properties = schema.properties || {};
        var required = schema.required || [];
        var names = Object.keys(properties);
        if (names.length) {
          var table = el("table", null, "schema");
          var head = el("tr");
          ["Field", "Type", "Required", "About"].forEach(function (h) { head.appendChild(el("th", h)); });
          var thead = el("thead");
          thead.appendChild(head);
          table.appendChild(thead);
          var tbody = el("tbody");
          names.forEach(function (name) {
            var spec = properties[name] && typeof properties[name] === "object" ? properties[name] : {};
            var tr = el("tr");
            var nameCell = el("td");
            nameCell.appendChild(el("code", name));
            tr.appendChild(nameCell);
            tr.appendChild(el("td", schemaType(spec)));
            tr.appendChild(el("td", required.indexOf(name) >= 0 ? "required" : "optional"));
            tr.appendChild(el("td", schemaNote(spec)));
            tbody.appendChild(tr);
          });
          table.appendChild(tbody);
          article.appendChild(table);
        } else {
          article.appendChild(el("p", "No fields: the answer is accept, decline or cancel.", "q-note"));
        }
      } else {
        var rest = {};
        Object.keys(params).forEach(function (k) { if (k !== "message") rest[k] = params[k]; });
        if (!empty(rest)) article.appendChild(el("pre", JSON.stringify(rest, null, 2), "q-params"));
      }
      var deadline = (deadlines || {})[key];
      if (deadline) {
        var due = el("p", "Unless answered, its deadline answers it at ", "q-deadline");
        due.appendChild(el("time", deadline.at));
        due.appendChild(document.createTextNode(": "));
        due.appendChild(el("code", valueText(deadline.answer)));
        article.appendChild(due);
      }
      article.appendChild(answerForm(key, request));
      box.appendChild(article);
    });
    show("inputs", !empty(requests));
  }

  function renderAnswers(answers) {
    var list = document.getElementById("answers");
    list.textContent = "";
    Object.keys(answers || {}).forEach(function (key) {
      var entry = answers[key] || {};
      var li = el("li");
      li.dataset.key = key;
      li.appendChild(el("code", key, "key"));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", String(entry.by) + (entry.name ? " (" + entry.name + ")" : ""), "by"));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("time", entry.at));
      if (entry.deadline) li.appendChild(document.createTextNode(" (deadline " + entry.deadline + ")"));
      list.appendChild(li);
    });
    show("answers", !empty(answers));
  }

  function sendAnswer(button) {
    var form = button.closest("form.answer");
    var notice = document.getElementById("notice");
    var token = tokenInput.value;
    if (!token) {
      notice.textContent = "Enter the operator token to answer.";
      notice.className = "error";
      return;
    }
    var action = button.dataset.action;
    var text = form.querySelector("textarea").value;
    var answer;
    try {
      if (action === "accept") answer = { action: "accept", content: JSON.parse(text || "{}") };
      else if (action === "raw") answer = JSON.parse(text);
      else answer = { action: action };
    } catch (e) {
      notice.textContent = "The answer is not JSON: " + e.message;
      notice.className = "error";
      return;
    }
    var answers = {};
    answers[form.dataset.key] = answer;
    button.disabled = true;
    fetch(base + "api/tasks/" + encodeURIComponent(body.dataset.task) + "/answer", {
      method: "POST",
      headers: { "X-Operator-Token": token, "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ answers: answers }),
    }).then(function (r) {
      return r.json().then(function (payload) { return { ok: r.ok, payload: payload }; });
    }).then(function (reply) {
      notice.textContent = reply.ok ? "Answered " + form.dataset.key + "." : reply.payload.error;
      notice.className = reply.ok ? "ok" : "error";
      button.disabled = false;
      loadTask(true);
    }).catch(function () {
      notice.textContent = "The dashboard could not be reached.";
      notice.className = "error";
      button.disabled = false;
    });
  }

  function renderTask(task) {
    renderFields(task);
    renderQuestions(task.inputRequests, task.inputDeadlines);
    renderAnswers(task.answers);
    var args = document.getElementById("arguments");
    args.textContent = "";
    Object.keys(task.arguments || {}).forEach(function (name) {
      var dt = el("dt");
      dt.appendChild(el("code", name));
      args.appendChild(dt);
      args.appendChild(el("dd", valueText(task.arguments[name])));
    });
    show("arguments", !empty(task.arguments));
    document.getElementById("error").textContent = empty(task.error) ? "" : JSON.stringify(task.error, null, 2);
    show("error", !empty(task.error));
    var history = document.getElementById("history");
    history.textContent = "";
    (task.statusHistory || []).slice().reverse().forEach(function (entry) {
      var li = el("li");
      var time = el("time", String(entry.at).slice(11, 19));
      time.title = entry.at;
      li.appendChild(time);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", entry.statusMessage, "message"));
      history.appendChild(li);
    });
    show("history", !empty(task.statusHistory));
    var list = document.getElementById("timeline");
    list.textContent = "";
    task.timeline.forEach(function (entry) {
      var li = el("li");
      li.appendChild(el("time", entry.at));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(statusBadge(entry.status));
      if (!empty(entry.statusMessage)) {
        li.appendChild(document.createTextNode(" "));
        li.appendChild(el("span", entry.statusMessage, "message"));
      }
      list.appendChild(li);
    });
    var result = document.getElementById("result");
    if (result && "result" in task) {
      result.textContent = empty(task.result) ? "" : JSON.stringify(task.result, null, 2);
      document.getElementById("result-box").hidden = task.result === null || task.result === undefined;
    }
    var terminal = ["completed", "failed", "cancelled"].indexOf(task.status) >= 0;
    document.getElementById("cancel").disabled = !task.canCancel || terminal;
  }

  function loadTask(once) {
    getJSON(base + "api/tasks/" + encodeURIComponent(body.dataset.task)).then(function (task) {
      renderTask(task);
      markLive(true, new Date().toISOString().slice(11, 19));
      body.dataset.updates = String(Number(body.dataset.updates || "0") + 1);
    }).catch(function () { markLive(false); }).then(function () { if (!once) schedule(function () { loadTask(false); }); });
  }

  function startDetail() {
    document.getElementById("inputs").addEventListener("click", function (event) {
      var target = event.target;
      if (target && target.dataset && target.dataset.action && target.closest("form.answer")) sendAnswer(target);
    });
    var button = document.getElementById("cancel");
    var notice = document.getElementById("notice");
    button.addEventListener("click", function () {
      var token = tokenInput.value;
      if (!token) {
        notice.textContent = "Enter the operator token to cancel.";
        notice.className = "error";
        return;
      }
      button.disabled = true;
      fetch(base + "api/tasks/" + encodeURIComponent(body.dataset.task) + "/cancel", {
        method: "POST",
        headers: { "X-Operator-Token": token, Accept: "application/json" },
      }).then(function (r) {
        return r.json().then(function (payload) { return { ok: r.ok, payload: payload }; });
      }).then(function (answer) {
        if (answer.ok) {
          notice.textContent = answer.payload.changed ? "Cancelled." : "Already " + answer.payload.status + ".";
          notice.className = "ok";
        } else {
          notice.textContent = answer.payload.error;
          notice.className = "error";
          button.disabled = false;
        }
        loadTask(true);
      }).catch(function () {
        notice.textContent = "The dashboard could not be reached.";
        notice.className = "error";
        button.disabled = false;
      });
    });
    schedule(function () { loadTask(false); });
  }

  if (body.dataset.page === "detail") startDetail(); else startOverview();
})();
