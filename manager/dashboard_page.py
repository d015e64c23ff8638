"""The dashboard's one page: plain HTML and JavaScript, no build step, fed by ``/api/state`` once a second.

It only reads: the page asks kfed-manager for ``/api/state`` (``manager.decisions.dashboard_view``) and draws it;
it holds no credentials and can change nothing. Text goes in through ``textContent`` only, so names and messages
from the cluster are never interpreted as HTML.
"""

from __future__ import annotations

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kfed federation</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 16px; color: #1d2329; background: #f6f7f9; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  h2 { font-size: 15px; margin: 18px 0 6px; }
  #status { color: #5b6570; font-size: 12px; }
  .cards { display: flex; flex-wrap: wrap; gap: 10px; }
  .card { background: #fff; border: 1px solid #d9dde2; border-radius: 6px; padding: 8px 10px; min-width: 260px; }
  .card h3 { font-size: 14px; margin: 0 0 4px; }
  .ok { color: #1a7f37; } .bad { color: #cf222e; }
  .bar { position: relative; height: 14px; background: #e7eaee; border-radius: 3px; margin: 2px 0 6px; }
  .bar > span { position: absolute; left: 0; top: 0; bottom: 0; background: #3b82f6; border-radius: 3px; }
  .bar > span.over { background: #d97706; }
  .bar > em { position: absolute; right: 4px; top: -1px; font-size: 11px; font-style: normal; color: #1d2329; }
  table { border-collapse: collapse; background: #fff; width: 100%; }
  th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #e7eaee; font-size: 13px; }
  th { background: #eef0f3; }
  td.msg { color: #5b6570; max-width: 520px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
</style>
</head>
<body>
<h1>kfed federation</h1>
<div id="status">connecting…</div>
<h2>Workers</h2><div id="workers" class="cards"></div>
<h2>ClusterQueues</h2><div id="queues" class="cards"></div>
<h2>Pending workloads (<span id="pending-count">0</span>)</h2>
<table id="pending"><thead><tr><th>Namespace</th><th>Name</th><th>Queue</th><th>State</th><th>Waiting for</th>
<th>Age</th></tr></thead><tbody></tbody></table>
<h2>Running workloads (<span id="running-count">0</span>)</h2>
<table id="running"><thead><tr><th>Namespace</th><th>Name</th><th>ClusterQueue</th><th>State</th><th>Worker</th>
<th>Message</th><th>Age</th></tr></thead><tbody></tbody></table>
<h2>Recent evictions</h2>
<table id="evictions"><thead><tr><th>Time</th><th>Namespace</th><th>Name</th><th>Reason</th><th>Message</th></tr>
</thead><tbody></tbody></table>
<script>
"use strict";
window.kfedLoadedAt = Date.now();
document.body.dataset.updates = "0";
function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}
function fmt(v, resource) {
  if (/memory|storage/.test(resource || "")) {
    const gi = v / 1073741824;
    return (gi >= 10 || Number.isInteger(gi) ? String(Math.round(gi)) : gi.toFixed(1)) + "Gi";
  }
  return Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1);
}
function bar(label, used, total, limit, resource) {
  const wrap = el("div");
  wrap.appendChild(el("div", label));
  const b = el("div", null, "bar");
  const ceiling = limit != null ? total + limit : total;
  const pct = ceiling > 0 ? Math.min(100, 100 * used / ceiling) : 0;
  const fill = el("span", null, used > total ? "over" : "");
  fill.style.width = pct + "%";
  b.appendChild(fill);
  b.appendChild(el("em", fmt(used, resource) + " / " + fmt(total, resource) +
    (limit != null ? " (+" + fmt(limit, resource) + ")" : "")));
  wrap.appendChild(b);
  return wrap;
}
function age(s) {
  if (s == null) return "-";
  if (s >= 7200) return Math.floor(s / 3600) + "h";
  if (s >= 120) return Math.floor(s / 60) + "m";
  return s + "s";
}
function rows(id, items, cells) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...items.map(item => {
    const tr = el("tr");
    cells(item).forEach(([text, cls]) => tr.appendChild(el("td", text, cls)));
    return tr;
  }));
}
function draw(state) {
  const workers = document.getElementById("workers");
  workers.replaceChildren(...state.workers.map(w => {
    const card = el("div", null, "card");
    card.dataset.worker = w.name;
    card.dataset.connected = String(w.connected);
    card.appendChild(el("h3", w.name));
    card.appendChild(el("div", w.connected ? "connected" : "not connected", w.connected ? "ok" : "bad"));
    if (w.problem) card.appendChild(el("div", w.problem, "bad"));
    if (w.reportAgeSeconds != null) card.appendChild(el("div", "capacity report " + w.reportAgeSeconds + "s old"));
    w.flavors.forEach(f => f.resources.forEach(r =>
      card.appendChild(bar(f.name + " · " + r.name, r.usage, r.nominal, null, r.name))));
    return card;
  }));
  const queues = document.getElementById("queues");
  queues.replaceChildren(...state.clusterQueues.map(q => {
    const card = el("div", null, "card");
    card.appendChild(el("h3", q.name + (q.cohort ? " (cohort " + q.cohort + ")" : "")));
    card.appendChild(el("div", "active: " + q.active + " · pending " + q.pending + " · admitted " + q.admitted,
      q.active === "True" ? "ok" : "bad"));
    q.resources.forEach(r =>
      card.appendChild(bar(r.flavor + " · " + r.resource, r.usage, r.nominal, r.borrowingLimit, r.resource)));
    return card;
  }));
  document.getElementById("pending-count").textContent = state.counts.pending;
  document.getElementById("running-count").textContent = state.counts.running;
  rows("pending", state.pending, w => [[w.namespace], [w.name], [w.queue], [w.state], [w.message, "msg"],
    [age(w.ageSeconds)]]);
  rows("running", state.running, w => [[w.namespace], [w.name], [w.clusterQueue], [w.state], [w.worker || "-"],
    [w.message, "msg"], [age(w.ageSeconds)]]);
  rows("evictions", state.evictions, e => [[e.time], [e.namespace], [e.name], [e.reason], [e.message, "msg"]]);
}
async function tick() {
  try {
    const response = await fetch("api/state", {cache: "no-store"});
    if (!response.ok) throw new Error("HTTP " + response.status);
    const state = await response.json();
    draw(state);
    document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
    document.getElementById("status").textContent = "live · updated " + state.generatedAt +
      (state.leader ? "" : " · this replica is standby: no data");
  } catch (err) {
    document.getElementById("status").textContent = "not updating: " + err.message;
  } finally {
    setTimeout(tick, 1000);
  }
}
tick();
</script>
</body>
</html>
"""
