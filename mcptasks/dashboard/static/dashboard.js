// mcptasks dashboard: live updates by polling the JSON API. Text is only ever set with
// textContent, never parsed as HTML.
(function () {
  "use strict";
  var body = document.body;
  var base = body.dataset.base;
  var refresh = Number(body.dataset.refresh) || 2000;
  var STATUSES = ["working", "input_required", "completed", "failed", "cancelled"];
  var COLORS = { working: "#2f6fde", input_required: "#d98c00", completed: "#2e9d4f", failed: "#d23c3c", cancelled: "#8a8a8a" };
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

  function age(seconds) {  // the same format as the server's age_text
    var s = Math.max(0, Math.floor(seconds));
    function two(n) { return (n < 10 ? "0" : "") + n; }
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + two(s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + two(Math.floor((s % 3600) / 60)) + "m";
    return Math.floor(s / 86400) + "d" + two(Math.floor((s % 86400) / 3600)) + "h";
  }

  function statusBadge(status) { return el("span", status, "status s-" + status); }

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

  function renderChart(chart) {
    var svg = document.getElementById("chart");
    var ns = "http://www.w3.org/2000/svg";
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var n = chart.times.length, width = 600, height = 140, gap = 4;
    var totals = chart.times.map(function (_, i) {
      return STATUSES.reduce(function (sum, s) { return sum + chart.series[s][i]; }, 0);
    });
    var max = Math.max(1, Math.max.apply(null, totals));
    var bar = width / n - gap;
    for (var i = 0; i < n; i++) {
      var y = height;
      STATUSES.forEach(function (s) {
        var v = chart.series[s][i];
        if (!v) return;
        var h = (v / max) * (height - 10);
        y -= h;
        var rect = document.createElementNS(ns, "rect");
        rect.setAttribute("x", String(i * (bar + gap)));
        rect.setAttribute("y", String(y));
        rect.setAttribute("width", String(bar));
        rect.setAttribute("height", String(h));
        rect.setAttribute("fill", COLORS[s]);
        rect.setAttribute("data-status", s);
        var title = document.createElementNS(ns, "title");
        title.textContent = chart.times[i] + " " + s + ": " + v;
        rect.appendChild(title);
        svg.appendChild(rect);
      });
      if (i % 3 === n % 3 || i === n - 1) {
        var label = document.createElementNS(ns, "text");
        label.setAttribute("x", String(i * (bar + gap)));
        label.setAttribute("y", "156");
        label.textContent = i === n - 1 ? "now" : chart.times[i].slice(11, 16);
        svg.appendChild(label);
      }
    }
    var legend = document.getElementById("legend");
    legend.textContent = "";
    STATUSES.forEach(function (s) {
      legend.appendChild(el("span", s, "key s-" + s));
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
      var idCell = el("td", null, "id");
      var link = el("a", t.taskId.slice(0, 12));
      link.href = base + "tasks/" + encodeURIComponent(t.taskId);
      idCell.appendChild(link);
      tr.appendChild(idCell);
      tr.appendChild(el("td", t.tool));
      var statusCell = el("td");
      statusCell.appendChild(statusBadge(t.status));
      tr.appendChild(statusCell);
      tr.appendChild(el("td", t.statusMessage || "", "message"));
      tr.appendChild(el("td", t.ownerHash, "owner"));
      tr.appendChild(el("td", age(t.ageSeconds)));
      tr.appendChild(el("td", t.attempt));
      tr.appendChild(el("td", t.runner || "-", "runner"));
      fragment.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(fragment);
  }

  function renderSummary(data) {
    STATUSES.forEach(function (s) {
      document.querySelector('.count[data-status="' + s + '"] .n').textContent = String(data.counts[s]);
    });
    document.getElementById("total").textContent = String(data.total);
    document.getElementById("queued").textContent = String(data.queued);
    document.getElementById("runners").textContent = String(data.runners);
    document.getElementById("oldest").textContent = data.oldestActive || "-";
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
    schedule(function () { loadSummary(false); });
  }

  // -- one task --------------------------------------------------------------------------------

  function renderTask(task) {
    ["taskId", "tool", "status", "statusMessage", "ownerHash", "createdAt", "lastUpdatedAt", "attempt", "runner"].forEach(function (key) {
      var cell = document.getElementById("d-" + key);
      if (cell) cell.textContent = task[key] === null || task[key] === undefined ? "" : String(task[key]);
    });
    var list = document.getElementById("timeline");
    list.textContent = "";
    task.timeline.forEach(function (entry) {
      var li = el("li");
      li.appendChild(el("time", entry.at));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(statusBadge(entry.status));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", entry.statusMessage || "", "message"));
      list.appendChild(li);
    });
    document.getElementById("inputs").textContent = JSON.stringify(task.inputRequests, null, 2);
    document.getElementById("error").textContent = JSON.stringify(task.error, null, 2);
    var result = document.getElementById("result");
    if (result && "result" in task) result.textContent = JSON.stringify(task.result, null, 2);
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
