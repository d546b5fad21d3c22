// The studio console: runtimes, commands, runs with their transcript, parked calls, steering,
// replay from step N; approve / request changes / reply / cancel for the apps' own runs; empty
// states that say what to do next. Plain browser JavaScript, no dependencies.
"use strict";

(function () {
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    sessionStorage.setItem("studio-token", fragment.get("token"));
    history.replaceState(null, "", location.pathname);
  }
  const token = sessionStorage.getItem("studio-token") || "";
  const $ = (id) => document.getElementById(id);
  const state = { runtimes: [], commands: [], runId: null, run: null, source: null, runsView: false, info: {}, page: { offset: 0, limit: 50, total: 0 } };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function flash(text, isError) {
    const f = $("flash");
    f.textContent = text;
    f.className = isError ? "error" : "";
  }

  async function api(method, path, body) {
    const headers = {};
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = text; }
    if (!res.ok) {
      const message = data && data.error ? data.error.code + ": " + data.error.message : res.status + " " + text;
      throw new Error(message);
    }
    return data;
  }

  const badge = (text) => el("span", { class: "badge " + text }, text);
  const demoBadge = () => el("span", { class: "badge demo", title: "the built-in deterministic demo model, not a real AI" }, "demo model");

  // Empty states: what to do next, with the line to type. `$TOKEN` is the service token
  // `serve` printed (this page keeps its own copy and never shows it).
  const auth = () => (token ? "-H \"Authorization: Bearer $TOKEN\" " : "");
  function hint(text, ...lines) {
    return el("div", { class: "hint" }, text, ...lines.map((line) => el("pre", {}, line)));
  }
  const firstApp = () => (state.info.apps || [])[0] || "host_app";
  const createAgentLine = () => "curl -s " + auth() + "-X PUT '" + location.origin + "/v1/agents/helper?app_id=" + firstApp() +
    "' -d '{\"app_id\":\"" + firstApp() + "\",\"name\":\"Helper\",\"system_prompt\":\"Help with tickets.\",\"allowed_tools\":[\"get_context\",\"request_approval\"]}'";
  const startRunLine = (app, agent) => "curl -s " + auth() + location.origin + "/v1/runs -d '{\"app_id\":\"" + app + "\",\"agent_id\":\"" + agent +
    "\",\"target\":{\"type\":\"ticket\",\"id\":\"T-1\"},\"instructions\":\"Summarize the ticket.\"}'";

  // Runtimes, agents, tools, breakpoints.
  async function loadRuntimes() {
    try {
      const data = await api("GET", "/api/runtimes");
      state.runtimes = data.runtimes || [];
    } catch (e) {
      $("runtimes").textContent = e.message;
      return;
    }
    const box = $("runtimes");
    box.replaceChildren();
    const select = $("nr-agent");
    const chosen = select.value;
    select.replaceChildren();
    // The service's own runtime registers once it has an agent.
    if (!state.runtimes.length) box.append(state.runsView
      ? noAgentHint()
      : hint("No runtime is linked to this studio yet. Start a service that links to it:", "AGENT_RUNTIME_STUDIO_URL=" + location.origin + " agent-runtime serve"));
    for (const rt of state.runtimes) {
      const bps = new Set(rt.breakpoints || []);
      const card = el("div", { class: "runtime", "data-runtime": rt.id },
        el("div", {}, el("b", {}, rt.id), " ", badge(rt.connected ? "connected" : "gone"), " ", el("span", { class: "muted" }, rt.service || "")));
      const tools = new Map();
      if (!(rt.agents || []).length) card.append(noAgentHint());
      for (const agent of rt.agents || []) {
        card.append(el("div", { class: "agent" }, "agent ", el("code", {}, agent.name), " ",
          el("span", { class: "muted" }, (agent.models || []).join(", "))));
        select.append(el("option", { value: rt.id + "|" + agent.name }, agent.name));
        for (const t of agent.tools || []) tools.set(t.name, t);
      }
      const editor = el("form", { class: "breakpoints" }, el("div", { class: "muted" }, "Breakpoints"));
      for (const [name, t] of tools) {
        const box = el("input", { type: "checkbox", name: "bp", value: name, id: "bp-" + rt.id + "-" + name });
        box.checked = bps.has(name);
        editor.append(el("label", { class: "tool", for: box.id }, box, " ", name, " ", el("span", { class: "muted" }, t.side_effects || "")));
      }
      editor.append(el("button", { type: "submit", class: "small", id: "save-breakpoints" }, "Save breakpoints"));
      editor.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const picked = [...editor.querySelectorAll("input[name=bp]:checked")].map((i) => i.value);
        try {
          await api("PUT", "/api/runtimes/" + encodeURIComponent(rt.id) + "/breakpoints", { tools: picked });
          flash("Breakpoints saved: " + (picked.join(", ") || "none"));
        } catch (e) { flash(e.message, true); }
      });
      card.append(editor);
      box.append(card);
    }
    if (chosen) select.value = chosen;
    const none = !select.options.length;
    if (none) select.append(el("option", { value: "" }, "no agent yet"));
    $("nr-submit").disabled = none;
  }

  // Commands this page issued, with their states.
  function track(status) {
    state.commands.unshift(status);
    renderCommands();
  }

  function renderCommands() {
    const body = $("commands").querySelector("tbody");
    body.replaceChildren();
    for (const c of state.commands) {
      const run = c.run_id ? el("a", { href: "#", title: c.run_id, onclick: (ev) => { ev.preventDefault(); openRun(c.run_id); } }, "…" + c.run_id.slice(-8)) : "";
      const why = c.reason ? " " + c.reason.kind + (c.reason.components ? " (" + c.reason.components.join(", ") + ")" : "") : "";
      body.append(el("tr", { "data-command": c.command_id },
        el("td", { title: c.command_id }, el("code", {}, "…" + c.command_id.slice(-8))), el("td", {}, badge(c.state)), el("td", {}, run),
        el("td", { title: c.error || "" }, (c.status || "") + (c.error ? " — " + c.error : "") + why)));
    }
  }

  async function pollCommands() {
    for (let i = 0; i < state.commands.length; i++) {
      const c = state.commands[i];
      if (["finished", "rejected", "lost"].includes(c.state)) continue;
      try { state.commands[i] = await api("GET", "/api/playground/commands/" + encodeURIComponent(c.command_id)); } catch (_) { /* keep the last state */ }
    }
    renderCommands();
  }

  async function enqueue(body) {
    try {
      const status = await api("POST", "/api/playground/runs", body);
      track(status);
      flash("Command " + status.command_id + " queued");
    } catch (e) { flash(e.message, true); }
  }

  $("new-run").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const [runtime, agent] = ($("nr-agent").value || "|").split("|");
    const input = $("nr-input").value.trim();
    enqueue({ runtime_id: runtime, agent, input: input || null, engine: $("nr-engine").value, side_effects: $("nr-effects").value });
  });

  // Runs (embedded studio only: run content stays in the service).
  async function loadRuns() {
    const list = $("runs");
    if (!state.runsView) { list.textContent = "Run content stays in each runtime; open the console of the service to see its runs."; return; }
    const filter = { app: $("rf-app").value, status: $("rf-status").value, q: $("rf-q").value.trim() };
    const query = new URLSearchParams({ ...filter, offset: String(state.page.offset), limit: String(state.page.limit) });
    let data;
    try { data = await api("GET", "/studio/api/runs?" + query); } catch (e) { list.textContent = e.message; return; }
    list.replaceChildren();
    const filtered = !!(filter.app || filter.status || filter.q);
    renderRunsEmpty(!data.runs.length && !filtered && !state.page.offset);
    if (!data.runs.length && filtered) list.append(el("li", { class: "muted" }, "No run matches."));
    renderPage(data);
    for (const r of data.runs) {
      const waiting = r.status === "paused" && r.pause_reason ? " · waiting: " + r.pause_reason : "";
      const label = [badge(r.status), " ", r.demo_model ? demoBadge() : "", " ", el("code", {}, r.id), " ", el("span", { class: "muted" }, r.app_id + "/" + r.agent_id + " · " + r.target + (r.studio ? " · studio" : "") + (r.forked_from ? " · fork of " + r.forked_from : "") + waiting)];
      const li = el("li", { "data-run": r.id, class: r.id === state.runId ? "active" : "", onclick: () => openRun(r.id) }, ...label);
      list.append(li);
    }
  }

  // Paging: the store pages one app's runs, so 10,000 of them cost one page.
  function renderPage(data) {
    state.page.total = data.total;
    $("runs-page").hidden = data.total <= data.limit && !state.page.offset;
    const first = data.runs.length ? data.offset + 1 : 0;
    $("runs-range").textContent = first + "–" + (data.offset + data.runs.length) + " of " + data.total;
    $("runs-prev").disabled = data.offset === 0;
    $("runs-next").disabled = data.offset + data.runs.length >= data.total;
  }

  function refilter() { state.page.offset = 0; loadRuns(); }
  $("rf-app").addEventListener("change", refilter);
  $("rf-status").addEventListener("change", refilter);
  let searchTimer = null;
  $("rf-q").addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(refilter, 250); });
  $("runs-filter").addEventListener("submit", (ev) => { ev.preventDefault(); refilter(); });
  $("runs-prev").addEventListener("click", () => { state.page.offset = Math.max(0, state.page.offset - state.page.limit); loadRuns(); });
  $("runs-next").addEventListener("click", () => { state.page.offset += state.page.limit; loadRuns(); });

  function noAgentHint() {
    return state.info.apps && !state.info.apps.length
      ? hint("No app is configured, so there are no agents. Try the demo (no key needed), or configure an app with AGENT_RUNTIME_APP_CONFIG (see the README):", "agent-runtime serve --demo")
      : hint("No agents yet. Create one (it needs a model: a provider key, or an approved endpoint of the app):", createAgentLine());
  }

  // No runs yet: the demo run one click away in demo mode, else the lines that make one.
  function renderRunsEmpty(empty) {
    const box = $("runs-empty");
    box.hidden = !empty;
    if (!empty) return;
    box.replaceChildren();
    if (state.info.demo) {
      box.append(el("div", {}, "No runs yet. The demo agent shows what the runtime does: streamed text, a plan, a tool call and a pause for your approval."),
        el("button", { type: "button", id: "start-demo", onclick: startDemoRun }, "Start a demo run"),
        hint("or from a terminal:", startRunLine("demo", "demo")));
    } else if (!(state.info.apps || []).length) {
      box.append(hint("No runs yet, and no app is configured. For a first run without any key, restart with the demo:", "agent-runtime serve --demo"));
    } else {
      box.append(hint("No runs yet. Create an agent, then start a run:", createAgentLine(), startRunLine(firstApp(), "helper")));
    }
  }

  async function startDemoRun() {
    try {
      const run = await api("POST", "/v1/runs", { app_id: "demo", agent_id: "demo", target: { type: "ticket", id: "DEMO-" + (Date.now() % 100000) }, instructions: "Show what the runtime does." });
      flash("Demo run " + run.id + " started");
      await openRun(run.id);
    } catch (e) { flash(e.message, true); }
  }

  let timeline = null;
  async function openRun(id) {
    if (!state.runsView) { flash("Run " + id + " is held by its runtime", false); return; }
    if (state.runId !== id && timeline) { timeline.close(); timeline = null; }
    const fresh = state.runId !== id;
    state.runId = id;
    $("run-empty").hidden = true;
    $("run").hidden = false;
    if (fresh) {
      $("timeline").replaceChildren();
      clock = { start: null, mark: null, paused: null };
      const url = "/studio/api/runs/" + encodeURIComponent(id) + "/events" + (token ? "?token=" + encodeURIComponent(token) : "");
      timeline = new EventSource(url);
      $("live").textContent = "live";
      timeline.addEventListener("run_event", (ev) => {
        const e = JSON.parse(ev.data);
        $("timeline").append(timelineEntry(e));
        scheduleRefresh();
      });
      timeline.onerror = () => { $("live").textContent = "reconnecting…"; };
      timeline.onopen = () => { $("live").textContent = "live"; };
    }
    await renderRun();
    loadRuns();
  }

  // The timeline's clock: each event's time since the run's first, and how long each model
  // call, tool call and pause took (a model call runs from the step's start to its answer).
  let clock = { start: null, mark: null, paused: null };
  const secs = (ms) => (ms / 1000).toFixed(2) + " s";
  function timelineEntry(e) {
    const at = Date.parse(e.sent_at);
    if (clock.start === null) clock.start = at;
    let took = "";
    if (e.type === "tool_call_finished" && e.data && e.data.duration_ms !== undefined) took = "tool call " + secs(e.data.duration_ms);
    if (e.type === "assistant_message_completed" && clock.mark !== null) took = "model call " + secs(at - clock.mark);
    if (e.type === "run.resumed" && clock.paused !== null) took = "paused for " + secs(at - clock.paused);
    if (["run.started", "run.resumed", "tool_call_finished", "plan_updated"].includes(e.type)) clock.mark = at;
    if (e.type === "run.paused") clock.paused = at;
    return el("li", { "data-type": e.type }, el("span", { class: "muted" }, "+" + secs(at - clock.start)), " ", el("code", {}, e.type), " ",
      took ? el("b", { class: "took" }, took) : "", " ", el("span", { class: "muted" }, summary(e.data)));
  }

  function summary(data) {
    if (!data) return "";
    const keys = ["tool_name", "status", "content", "error", "reason"];
    return keys.filter((k) => data[k]).map((k) => k + "=" + String(data[k]).slice(0, 80)).join(" ");
  }

  let refreshTimer = null;
  function scheduleRefresh() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; renderRun(); loadRuns(); }, 150);
  }

  async function renderRun() {
    const id = state.runId;
    if (!id) return;
    let d;
    try { d = await api("GET", "/studio/api/runs/" + encodeURIComponent(id)); } catch (e) { flash(e.message, true); return; }
    if (id !== state.runId) return;
    const run = d.run;
    state.run = run;
    state.source = { run_id: run.id, agent: run.app_id + "/" + run.agent_id, steps: d.steps, studio: !!d.studio };
    $("run-head").replaceChildren(el("div", {}, el("code", { id: "run-id" }, run.id), " ", el("span", { id: "run-status" }, badge(run.status)), " ",
      el("span", { class: "muted" }, run.app_id + "/" + run.agent_id + (d.studio ? " · started from the studio (" + (d.studio.engine || "live") + ")" : " · the app's own run: answered through its /v1 API"))),
      el("div", { class: "muted", id: "run-model" }, modelLabel(run)),
      el("div", { class: "muted", id: "run-error" }, run.error_message || ""));
    renderActions(run, d);
    $("run-usage").textContent = "steps " + d.steps + " · tokens " + d.usage.total_tokens + " (in " + d.usage.input_tokens + ", out " + d.usage.output_tokens + ")";
    $("rp-step").max = String(d.steps);

    const pending = $("pending");
    pending.replaceChildren();
    const waiting = (d.pending || []).filter((p) => !p.decision && p.interaction_id);
    if (!waiting.length) pending.textContent = run.status === "paused" ? "" : "Nothing waits for you.";
    for (const p of d.studio ? waiting : []) {
      const reason = el("input", { placeholder: "reason (deny) or result (resolve)", class: "decision-text" });
      const decide = (decision) => async () => {
        const body = { call_id: p.call.id, decision };
        if (decision === "deny") body.reason = reason.value;
        if (decision === "resolve") body.content = reason.value;
        try {
          track(await api("POST", "/api/runs/" + encodeURIComponent(id) + "/approvals", body));
          flash(decision + " sent for " + p.call.id);
        } catch (e) { flash(e.message, true); }
      };
      pending.append(el("div", { class: "card", "data-call": p.call.id },
        el("div", {}, el("b", {}, p.call.name), " ", el("code", {}, p.call.arguments)),
        reason,
        el("button", { type: "button", class: "approve", onclick: decide("approve") }, "Approve"),
        el("button", { type: "button", class: "deny", onclick: decide("deny") }, "Deny"),
        el("button", { type: "button", class: "resolve", onclick: decide("resolve") }, "Resolve")));
    }

    const tr = $("transcript");
    tr.replaceChildren();
    let step = 0;
    for (const m of d.transcript || []) {
      if (m.role === "system") continue;
      const label = m.role === "assistant" ? "step " + (step++) + " · assistant" : m.role;
      const calls = (m.tool_calls || []).map((c) => el("div", { class: "muted" }, "→ " + c.name + " " + c.arguments + " [" + c.id + "]"));
      tr.append(el("li", { class: "msg " + m.role }, el("span", { class: "role" }, label), m.content || "", ...calls));
    }

    const asks = $("interactions").querySelector("tbody");
    asks.replaceChildren();
    for (const i of d.interactions || []) {
      const answer = i.response_payload ? JSON.stringify(i.response_payload).slice(0, 160) : "";
      asks.append(el("tr", {}, el("td", {}, i.interaction_kind || ""), el("td", {}, i.title || ""), el("td", {}, badge(i.status)), el("td", {}, answer)));
    }

    const calls = $("tool-calls").querySelector("tbody");
    calls.replaceChildren();
    for (const c of d.tool_calls || []) {
      calls.append(el("tr", {}, el("td", {}, c.tool_name), el("td", {}, el("code", {}, JSON.stringify(c.input))),
        el("td", {}, c.error || (c.output ? JSON.stringify(c.output).slice(0, 200) : "")), el("td", {}, c.approval_required ? "yes" : "")));
    }
  }

  function modelLabel(run) {
    const model = run.input && run.input.model;
    if (!model) return "";
    const demo = model.provider === "demo";
    return el("span", {}, "model " + model.provider + "/" + model.model + " ", demo ? demoBadge() : "",
      demo ? " answers are made up by the runtime's built-in demo model, not a real AI" : "");
  }

  // The app's own runs: a person's answer goes through the service's API (/v1), as a host's would.
  async function v1(path, body) {
    const run = state.run;
    const url = "/v1/runs/" + encodeURIComponent(run.id) + path + "?app_id=" + encodeURIComponent(run.app_id);
    try {
      await api("POST", url, body);
      flash(path.slice(1) + " sent for " + run.id);
      renderRun();
      loadRuns();
    } catch (e) { flash(e.message, true); }
  }

  function renderActions(run, d) {
    const box = $("run-actions");
    box.replaceChildren();
    if (d.studio || run.status !== "paused") return;
    const open = (d.interactions || []).filter((i) => i.status === "pending").pop();
    const title = open ? (open.title || open.interaction_kind) : "paused (" + run.pause_reason + ")";
    const text = el("input", { id: "answer-text", placeholder: "your answer or the changes you want" });
    const card = el("div", { class: "card", id: "run-waiting" }, el("div", {}, el("b", {}, title)));
    if (run.pause_reason === "human_approval") {
      card.append(text,
        el("button", { type: "button", id: "approve-run", onclick: () => v1("/approve", {}) }, "Approve"),
        el("button", { type: "button", id: "request-changes", onclick: () => v1("/request-changes", { content: text.value || "Please change it." }) }, "Request changes"));
    } else if (run.pause_reason === "human_input") {
      card.append(text, el("button", { type: "button", id: "reply-run", onclick: () => v1("/resume", { intent: "reply", content: text.value }) }, "Reply"));
    } else {
      card.append(el("button", { type: "button", id: "continue-run", onclick: () => v1("/resume", { intent: "continue" }) }, "Continue"));
    }
    box.append(card);
  }

  $("steer-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = $("steer-text").value.trim();
    if (!text || !state.runId) return;
    try {
      await api("POST", "/api/runs/" + encodeURIComponent(state.runId) + "/steer", { message: text });
      $("steer-text").value = "";
      flash("Steer sent");
    } catch (e) { flash(e.message, true); }
  });

  $("cancel-run").addEventListener("click", async () => {
    if (!state.runId) return;
    if (state.run && state.run.id === state.runId && !state.source.studio) { v1("/cancel", {}); return; }
    try { await api("POST", "/api/runs/" + encodeURIComponent(state.runId) + "/cancel", {}); flash("Cancel sent"); } catch (e) { flash(e.message, true); }
  });

  $("replay-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!state.source) return;
    let edits;
    try { edits = JSON.parse($("rp-edits").value || "[]"); } catch (e) { flash("transcript edits: " + e.message, true); return; }
    const runtime = state.runtimes.find((rt) => (rt.agents || []).some((a) => a.name === state.source.agent));
    if (!runtime) { flash("No connected runtime has agent " + state.source.agent, true); return; }
    enqueue({
      runtime_id: runtime.id,
      agent: state.source.agent,
      source: { run_id: state.source.run_id, from_step: Number($("rp-step").value || 0) },
      transcript_edits: edits,
      engine: $("rp-engine").value,
      side_effects: $("rp-effects").value,
    });
  });

  $("refresh-runs").addEventListener("click", loadRuns);
  $("new-demo-run").addEventListener("click", startDemoRun);

  $("decide-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const run = $("dc-run").value.trim();
    const decision = $("dc-decision").value;
    const body = { call_id: $("dc-call").value.trim(), decision };
    if (decision === "deny") body.reason = $("dc-text").value;
    if (decision === "resolve") body.content = $("dc-text").value;
    try {
      track(await api("POST", "/api/runs/" + encodeURIComponent(run) + "/approvals", body));
      flash(decision + " sent");
    } catch (e) { flash(e.message, true); }
  });

  async function start() {
    try {
      state.info = (await api("GET", "/studio/api/info")) || {};
      state.runsView = true;
      $("demo-banner").hidden = !state.info.demo;
      $("new-demo-run").hidden = !state.info.demo;
      $("runs-filter").hidden = false;
      for (const app of state.info.apps || []) $("rf-app").append(el("option", { value: app }, app));
      $("mode").textContent = "embedded in the service";
    } catch (_) {
      $("mode").textContent = "standalone";
      $("decide-form").hidden = false;
    }
    await loadRuntimes();
    await loadRuns();
    setInterval(loadRuntimes, 5000);
    setInterval(loadRuns, 5000);
    setInterval(pollCommands, 700);
    setInterval(() => { if (state.runId) renderRun(); }, 3000);
  }
  start();
})();
