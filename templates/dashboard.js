// The dashboard's logic: every few seconds it reads the head's API (docs/API.md) with the token
// from the page's address (?token=...), renders nodes, jobs, the selected job's charts and the
// GPU charts, and says in a banner what is wrong when it cannot (401: the token; no answer: the
// head). What it rendered is also kept in window.__verl and in #verl-state (JSON), and on the
// elements' data-* attributes, so that a test in a headless browser can read what it shows.
(function () {
  "use strict";
  const params = new URLSearchParams(window.location.search);
  const token = params.get("token") || "";
  const refreshMs = Math.max(500, Number(params.get("refresh_ms")) || 3000);
  const SCORE_KEYS = ["critic/score/mean", "val/score/mean"];
  const LOSS_KEYS = ["actor/pg_loss", "critic/vf_loss", "actor/kl_loss", "actor/entropy", "sft/loss"];
  const THROUGHPUT_KEYS = ["perf/throughput"];
  // The trainer's phases (trainer/ppo_trainer.cc ScopedTimer names); timing_s/step is their total.
  const TIMING_KEYS = ["timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/ref",
                       "timing_s/values", "timing_s/adv", "timing_s/update_critic", "timing_s/update_actor",
                       "timing_s/testing", "timing_s/sft"];
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf"];

  const state = {
    ok: false, error: null, error_kind: null, updated_ms: 0, refreshes: 0,
    cluster: null, nodes: [], jobs: [], selected: params.get("job") || null, job: null,
    rows: [], charts: {}, gpus: false,
  };
  window.__verl = state;
  const charts = {};
  let metricsJob = null;   // the job whose rows state.rows holds
  let lastStep = -1;

  class ApiError extends Error {
    constructor(kind, message) { super(message); this.kind = kind; }
  }

  async function api(path) {
    let res;
    try {
      res = await fetch(path, { headers: token ? { Authorization: "Bearer " + token } : {}, cache: "no-store" });
    } catch (e) {
      throw new ApiError("unreachable", "the head at " + window.location.host + " does not answer (" + e.message +
                         "): is the cluster up? 'verlctl status' says; 'verlctl up' starts it");
    }
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (res.status === 401) {
      throw new ApiError("token", "401: " + (token ? "the token in this address is not this cluster's" :
                         "this address carries no token") + ". Open /dashboard?token=TOKEN with the token from " +
                         "~/.verlctl/<cluster>/token (it changes with every 'verlctl up')");
    }
    if (!res.ok) {
      const what = body && body.error ? body.error : res.statusText;
      const hint = body && body.hint ? " (" + body.hint + ")" : "";
      throw new ApiError("http", "GET " + path + ": " + res.status + " " + what + hint);
    }
    return body;
  }

  // ---------------------------------------------------------------- formatting
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("data-")) e.setAttribute(k, v); else e[k] = v;
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
    return e;
  }
  function fmtTime(ms) { return ms ? new Date(ms).toLocaleString() : "—"; }
  function fmtDuration(s) {
    if (!(s >= 0)) return "—";
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
    const m = Math.floor(s / 60), h = Math.floor(m / 60);
    return h ? h + "h" + String(m % 60).padStart(2, "0") + "m" : m + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
  }
  function fmtBytes(b) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; ++i; }
    return b.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function stateBadge(s) { return el("span", { class: "state state-" + s, "data-state": s }, s); }

  // ---------------------------------------------------------------- tables
  function renderNodes() {
    const tbody = document.querySelector("#nodes tbody");
    tbody.replaceChildren();
    for (const n of state.nodes) {
      const r = n.resources || {};
      const gpus = r.gpus ? r.gpus + (r.gpu_names && r.gpu_names.length ? " × " + r.gpu_names[0] : "") : "0";
      const ib = (r.ib_ports || []).map(p => p.device + "/" + p.port + " " + (p.state || "") + " " + (p.rate || "")).join(", ") || "none";
      const reason = n.lost_reason || n.reason || "";
      const since = n.state === "alive" ? "up since " + fmtTime(n.registered_ms) : fmtTime(n.lost_ms) + (reason ? ": " + reason : "");
      tbody.append(el("tr", { "data-node": n.name, "data-state": n.state },
        el("td", {}, n.name), el("td", {}, n.host), el("td", {}, stateBadge(n.state)), el("td", {}, since),
        el("td", {}, n.heartbeat_age_s != null ? n.heartbeat_age_s.toFixed(1) + " s ago" : "—"),
        el("td", {}, r.cpus != null ? r.cpus : "—"), el("td", {}, r.memory_bytes ? fmtBytes(r.memory_bytes) : "—"),
        el("td", { "data-gpus": r.gpus || 0 }, gpus), el("td", {}, ib)));
    }
  }

  function renderJobs() {
    const tbody = document.querySelector("#jobs tbody");
    tbody.replaceChildren();
    document.getElementById("no-jobs").hidden = state.jobs.length > 0;
    for (const j of state.jobs) {
      const end = j.ended_ms || (j.started_ms ? Date.now() : 0);
      const tr = el("tr", { class: "selectable" + (j.id === state.selected ? " selected" : ""), "data-job": j.id, "data-state": j.state },
        el("td", {}, j.id), el("td", {}, j.kind), el("td", {}, stateBadge(j.state)),
        // A command job (submit -- CMD) has no steps: its command instead.
        j.command != null ? el("td", { class: "command", title: j.command }, j.command.length > 48 ? j.command.slice(0, 45) + "..." : j.command)
          : el("td", { "data-step": j.step }, j.step + (j.total_steps ? " / " + j.total_steps : "")),
        el("td", {}, j.world_size), el("td", {}, fmtTime(j.submitted_ms)), el("td", {}, fmtTime(j.started_ms)),
        el("td", {}, fmtTime(j.ended_ms)), el("td", {}, j.started_ms ? fmtDuration((end - j.started_ms) / 1000) : "—"),
        el("td", {}, j.restarts || 0));
      tr.addEventListener("click", () => { state.selected = j.id; refresh(); });
      tbody.append(tr);
    }
  }

  function renderJob() {
    const section = document.getElementById("job-section");
    const j = state.job;
    section.hidden = !j;
    if (!j) return;
    section.setAttribute("data-job", j.id);
    document.getElementById("job-title").textContent = j.id + " ";
    document.getElementById("job-title").append(stateBadge(j.state));
    const m = j.latest_metrics || {};
    const parts = [j.command != null ? "command " + j.command : "step " + j.step + (j.total_steps ? " / " + j.total_steps : "")];
    if (j.eta_s != null) parts.push("ETA " + fmtDuration(j.eta_s));
    for (const k of ["critic/score/mean", "val/score/mean", "perf/throughput"])
      if (typeof m[k] === "number") parts.push(k + " " + m[k].toPrecision(4));
    if (j.placement && j.placement.length)
      parts.push("ranks on " + j.placement.map(p => p.rank + "@" + p.host + (p.device ? "(" + p.device + ")" : "")).join(", "));
    document.getElementById("job-summary").textContent = parts.join(" · ");
    const failure = document.getElementById("job-failure");
    failure.hidden = !j.failure;
    if (j.failure) {
      const f = j.failure;
      // A failed job preflight names a node, not a rank: no rank had started.
      const where = (f.rank != null ? "rank " + f.rank + " on " : "") + (f.host || f.node || "?");
      const reason = f.reason || "failed";
      failure.textContent = (reason.startsWith(where) ? reason : where + ": " + reason) +
        (f.exit_code != null ? " (exit " + f.exit_code + ")" : "") + (f.signal ? " (signal " + f.signal + ")" : "") +
        (f.last_lines && f.last_lines.length ? "\n" + f.last_lines.join("\n") : "");
    }
    // Scaling health (launcher/scaling.h): the head's verdicts, one row per check.
    const scaling = document.getElementById("job-scaling");
    const checks = (j.scaling && j.scaling.checks) || [];
    scaling.hidden = checks.length === 0;
    scaling.querySelector("tbody").replaceChildren(...checks.map(c => el("tr", { "data-check": c.name, "data-status": c.status },
      el("td", {}, c.name), el("td", {}, c.value == null ? "-" : c.value.toFixed(1) + (c.unit ? " " + c.unit : "")),
      el("td", {}, c.threshold), el("td", { class: "status-" + c.status }, c.status),
      el("td", {}, c.reason + (c.try ? " — try: " + c.try : "")))));
    const events = document.getElementById("job-events");
    events.replaceChildren(...(j.events || []).map(e =>
      el("li", { "data-state": e.state }, fmtTime(e.time_ms) + " " + e.state + (e.detail ? ": " + e.detail : ""))));
  }

  // ---------------------------------------------------------------- charts
  function chart(id, type, stacked, xTitle) {
    if (charts[id]) return charts[id];
    const canvas = document.getElementById(id);
    charts[id] = new Chart(canvas, {
      type: type,
      data: { datasets: [] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: "nearest", intersect: false },
        scales: {
          x: { type: "linear", stacked: stacked, title: { display: true, text: xTitle } },
          y: { stacked: stacked, beginAtZero: stacked },
        },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } },
        elements: { point: { radius: 1.5 } },
      },
    });
    return charts[id];
  }

  // Sets the chart's series (name -> [{x, y}]) and records what it holds for tests.
  function setSeries(id, type, series, opts) {
    const c = chart(id, type, !!(opts && opts.stacked), (opts && opts.x) || "step");
    const names = Object.keys(series).filter(k => series[k].length > 0);
    c.data.datasets = names.map((name, i) => ({
      label: name, data: series[name], borderColor: COLORS[i % COLORS.length],
      backgroundColor: COLORS[i % COLORS.length] + (type === "bar" ? "cc" : "33"), borderWidth: type === "bar" ? 0 : 1.5,
      spanGaps: true, showLine: true,
    }));
    c.update("none");
    const points = names.reduce((n, k) => n + series[k].length, 0);
    c.canvas.setAttribute("data-points", points);
    c.canvas.setAttribute("data-series", names.join(","));
    state.charts[id] = { points: points, series: names };
  }

  function seriesOf(rows, keys) {
    const out = {};
    for (const k of keys) out[k] = [];
    for (const r of rows)
      for (const k of keys)
        if (typeof r[k] === "number" && isFinite(r[k])) out[k].push({ x: r.step, y: r[k] });
    return out;
  }

  function renderJobCharts() {
    const rows = state.rows;
    setSeries("chart-score", "line", seriesOf(rows, SCORE_KEYS));
    const lossKeys = LOSS_KEYS.slice();
    for (const r of rows) for (const k of Object.keys(r)) if (/(^|\/|_)loss$/.test(k) && !lossKeys.includes(k)) lossKeys.push(k);
    setSeries("chart-loss", "line", seriesOf(rows, lossKeys));
    setSeries("chart-throughput", "line", seriesOf(rows, THROUGHPUT_KEYS));
    const timingKeys = TIMING_KEYS.slice();
    for (const r of rows)
      // timing_s/comm is time inside the phases (their collectives), not a phase: stacking it would count it twice.
      for (const k of Object.keys(r)) if (k.startsWith("timing_s/") && k !== "timing_s/step" && k !== "timing_s/comm" && !timingKeys.includes(k)) timingKeys.push(k);
    setSeries("chart-timing", "bar", seriesOf(rows, timingKeys), { stacked: true });
  }

  function renderGpus() {
    const util = {}, mem = {};
    const now = Date.now();
    let any = false;
    for (const n of state.nodes) {
      for (const s of n.gpu_samples || []) {
        for (const g of s.gpus || []) {
          any = true;
          const name = n.name + " gpu" + g.index;
          const x = (s.time_ms - now) / 1000;
          if (typeof g.util_pct === "number") (util[name] = util[name] || []).push({ x: x, y: g.util_pct });
          if (typeof g.mem_used_mib === "number") (mem[name] = mem[name] || []).push({ x: x, y: g.mem_used_mib });
        }
      }
      if ((n.resources || {}).gpus > 0) any = true;
    }
    state.gpus = any;
    document.getElementById("no-gpus").hidden = any;
    document.getElementById("gpu-charts").hidden = !any;
    document.getElementById("gpu-section").setAttribute("data-gpus", any ? "yes" : "no");
    if (any) {
      setSeries("chart-gpu-util", "line", util, { x: "seconds ago" });
      setSeries("chart-gpu-mem", "line", mem, { x: "seconds ago" });
    }
  }

  // ---------------------------------------------------------------- refresh
  function showError(e) {
    state.ok = false;
    state.error = e.message;
    state.error_kind = e.kind || "error";
    const banner = document.getElementById("banner");
    banner.textContent = e.message;
    banner.hidden = false;
    banner.setAttribute("data-kind", state.error_kind);
    document.body.setAttribute("data-state", "error");
    document.body.setAttribute("data-error", state.error_kind);
    document.getElementById("updated").textContent = state.updated_ms ?
      "showing what it said at " + new Date(state.updated_ms).toLocaleTimeString() : "nothing loaded";
  }

  function publish() {
    const pre = document.getElementById("verl-state");
    pre.textContent = JSON.stringify({
      ok: state.ok, error: state.error, error_kind: state.error_kind, refreshes: state.refreshes,
      cluster: state.cluster && state.cluster.name,
      nodes: state.nodes.map(n => ({ name: n.name, state: n.state, cpus: (n.resources || {}).cpus })),
      jobs: state.jobs.map(j => ({ id: j.id, state: j.state, step: j.step })),
      selected: state.selected, rows: state.rows.length, charts: state.charts, gpus: state.gpus,
    });
  }

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const [cluster, nodes, jobs] = await Promise.all([api("/api/cluster"), api("/api/nodes?samples=1"), api("/api/jobs")]);
      state.cluster = cluster;
      state.nodes = nodes.nodes || [];
      state.jobs = jobs.jobs || [];
      if (!state.selected || !state.jobs.some(j => j.id === state.selected)) {
        const running = state.jobs.find(j => j.state === "RUNNING");
        state.selected = running ? running.id : (state.jobs[0] ? state.jobs[0].id : null);
      }
      state.job = state.selected ? await api("/api/jobs/" + encodeURIComponent(state.selected)) : null;
      if (state.selected !== metricsJob) { metricsJob = state.selected; state.rows = []; lastStep = -1; }
      if (state.selected) {
        const m = await api("/api/jobs/" + encodeURIComponent(state.selected) + "/metrics?after=" + lastStep);
        for (const r of m.rows || []) {
          // A step seen before (a resumed run redoes it) replaces the old row.
          state.rows = state.rows.filter(x => x.step !== r.step);
          state.rows.push(r);
          lastStep = Math.max(lastStep, r.step);
        }
        state.rows.sort((a, b) => a.step - b.step);
      }
      document.getElementById("cluster-name").textContent = cluster.name || "";
      const c = cluster.counts || {};
      document.getElementById("cluster-info").textContent = (cluster.backend || "") + " · " + (c.alive || 0) + " alive, " +
        (c.lost || 0) + " lost · head " + ((cluster.head || {}).bind || window.location.host);
      renderNodes();
      renderJobs();
      renderJob();
      if (state.job) renderJobCharts();
      renderGpus();
      state.ok = true; state.error = null; state.error_kind = null;
      state.updated_ms = Date.now();
      state.refreshes++;
      document.getElementById("banner").hidden = true;
      document.body.setAttribute("data-state", "ok");
      document.body.removeAttribute("data-error");
      document.body.setAttribute("data-refreshes", state.refreshes);
      document.getElementById("updated").textContent = "updated " + new Date(state.updated_ms).toLocaleTimeString();
    } catch (e) {
      showError(e instanceof ApiError ? e : new ApiError("error", "the page failed: " + e.message));
    } finally {
      busy = false;
      publish();
    }
  }

  refresh();
  setInterval(refresh, refreshMs);
})();
