// The veracity page: no build step, no external URL. Talks to the API under /v1/ (same origin; with a
// token the browser sends the veracity_token cookie set by the sign-in form).
"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

async function api(path, options) {
  const resp = await fetch(path, Object.assign({credentials: "same-origin"}, options || {}));
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { const body = await resp.json(); msg = body.error + (body.hint ? " (" + body.hint + ")" : ""); } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return resp;
}

function pretty(value) { return JSON.stringify(value, null, 2); }
function articleHref(title, pid) {
  return "#article/" + encodeURIComponent(title) + (pid ? "?p=" + encodeURIComponent(pid) : "");
}
function showError(node, message) { node.textContent = message; node.hidden = !message; }

// -- pickers ------------------------------------------------------------------------------------------
async function loadPickers() {
  const info = await (await api("/v1/methods")).json();
  for (const [mSel, lSel] of [["#method", "#labels"], ["#batch-method", "#batch-labels"]]) {
    const m = $(mSel), l = $(lSel);
    m.replaceChildren(...info.methods.map((x) => el("option", {value: x.name, title: x.summary,
      disabled: x.available ? null : true, selected: x.name === info.default_method ? true : null},
      x.name + (x.available ? "" : " (needs an index)"))));
    l.replaceChildren(...info.labels.map((x) => el("option", {value: x.name, title: x.labels.join(" / ")},
      x.name + " (" + x.labels.length + " labels)")));
  }
}

async function loadHealth() {
  try {
    const resp = await fetch("/healthz");
    const h = await resp.json();
    const model = h.model_server.ok ? "model ✓" : "model ✗";
    const index = h.index.ok ? "index ✓ (" + (h.index.passages ?? "?") + " passages)" : "no index";
    $("#health").textContent = model + " · " + index;
  } catch (e) { $("#health").textContent = "health unknown"; }
}

// -- the live trace -----------------------------------------------------------------------------------
const steps = new Map();

function addTraceEvent(ev) {
  const trace = $("#trace");
  if (ev.kind === "role.started") {
    const body = el("div", {class: "body"}, el("strong", {text: "Prompt"}),
      ...ev.messages.map((m) => el("pre", {class: "prompt", text: m.role + ":\n" + m.content})));
    const sum = el("summary", {}, el("strong", {text: ev.role}), el("span", {class: "dim", text: "running"}));
    const det = el("details", {class: "step running", "data-step": ev.step}, sum, body);
    steps.set(ev.step, det);
    trace.append(det);
  } else if (ev.kind === "role.finished" || ev.kind === "role.failed") {
    const det = steps.get(ev.step);
    if (!det) return;
    det.classList.remove("running");
    if (ev.kind === "role.failed") det.classList.add("failed");
    det.querySelector("summary .dim").textContent =
      (ev.prompt_tokens + ev.completion_tokens) + " tokens · " + ev.latency_s.toFixed(2) + " s" +
      (ev.kind === "role.failed" ? " · failed" : "");
    const body = det.querySelector(".body");
    body.append(el("strong", {text: ev.kind === "role.failed" ? "Error" : "Reply (JSON)"}),
      el("pre", {class: "reply", text: ev.kind === "role.failed" ? ev.error : pretty(ev.output)}));
  } else if (ev.kind === "tool") {
    const list = el("ul", {}, ...ev.hits.map((h) => el("li", {},
      el("a", {href: articleHref(h.title, h.passage_id), text: h.title}), " ",
      el("span", {class: "dim", text: h.passage_id + " · " + Number(h.score).toFixed(3)}))));
    trace.append(el("details", {class: "step tool"},
      el("summary", {}, el("strong", {text: ev.tool + (ev.role ? " (" + ev.role + ")" : "")}), " ",
        el("span", {class: "dim", text: "“" + ev.query + "” · " + ev.hits.length + " hits"})),
      el("div", {class: "body"}, ev.hits.length ? list : el("p", {class: "dim", text: "no hits"}))));
  } else {
    const {kind, t, ...rest} = ev;
    trace.append(el("details", {class: "step event"}, el("summary", {}, el("strong", {text: kind})),
      el("div", {class: "body"}, el("pre", {text: pretty(rest)}))));
  }
}

function minConfidence() {
  // the page's "Min. confidence" (empty: never abstain)
  const raw = $("#min-confidence").value.trim();
  return raw === "" ? {} : {min_confidence: Number(raw)};
}

function confidenceLine(record) {
  // the verdict's own probability for its label (null: the engine gave no logprobs)
  const c = record.confidence;
  const text = c == null ? "Confidence: not available (the model server returned no token probabilities)"
    : "Confidence: " + c.toFixed(2) + (c < 0.7 ? " (unsure)" : "");
  return el("p", {id: "confidence", class: c == null ? "dim" : (c < 0.7 ? "ungrounded" : "dim"), text});
}

function showVerdict(record, checkId) {
  const v = $("#verdict");
  const actions = el("div", {class: "actions"});
  if (checkId) {
    actions.append(el("a", {href: "#check/" + checkId, id: "permalink", text: "Permalink"}),
      el("a", {href: "/v1/checks/" + checkId + "?download=1", download: "check-" + checkId + ".json",
        id: "download-json", text: "Download JSON"}));
  }
  const s = record.trace.summary;
  v.replaceChildren(
    el("span", {class: "badge " + record.label, id: "badge", text: record.label.replaceAll("_", " ")}),
    el("p", {class: "claimtext", text: record.claim}),
    el("p", {id: "explanation", text: record.explanation || "(no explanation)"}),
    el("p", {class: "dim", text: record.method + " · " + s.llm_calls + " LLM calls · " +
      (s.prompt_tokens + s.completion_tokens) + " tokens · " + s.tool_calls + " tool calls"}),
    actions);
  v.insertBefore(confidenceLine(record), actions);
  if (record.abstained) {
    v.insertBefore(el("p", {class: "ungrounded", id: "abstained",
      text: "Abstained: the verdict would be " + record.abstained_label.replaceAll("_", " ") +
        ", below the minimum confidence asked for."}), actions);
  }
  if (record.grounding === "ungrounded") {
    v.insertBefore(el("p", {class: "ungrounded", id: "ungrounded",
      text: "Ungrounded: a quote the verdict rests on is not in its passage" +
        (record.confidence != null && record.confidence < 0.7 ? ", and the model was unsure (confidence " +
          record.confidence.toFixed(2) + ")." : ".")}), actions);
  }
  $("#evidence").replaceChildren(...evidenceCards(record));
}

function evidenceCards(record) {
  // the cited passages as cards (the Check tab and each claim of the Text tab): the title opens the article,
  // the passage with the quotes found in it marked, the quotes not in it, its id and retrieval score
  const quotes = record.quotes || [];
  if (!record.evidence.length) return [el("p", {class: "dim", text: "No evidence passages cited."})];
  return record.evidence.map((e) => {
    const mine = quotes.filter((q) => q.passage_id === e.passage_id);
    const score = typeof e.score === "number" ? " · retrieval score " + e.score.toFixed(3) : "";
    return el("div", {class: "card ev"},
      el("h3", {}, el("a", {href: articleHref(e.title, e.passage_id), class: "ev-link", text: e.title})),
      passageWithQuotes(e.text, mine.filter((q) => q.found)),
      ...mine.filter((q) => !q.found).map((q) =>
        el("p", {class: "quote-missing", text: "“" + q.text + "” is not in this passage"})),
      el("p", {class: "meta", text: e.passage_id + score}));
  });
}

function passageWithQuotes(text, found) {
  // the passage as text nodes, each quoted span in a <mark>; offsets are Python's (code points), so the
  // text is sliced as an array of code points, not UTF-16 units
  const chars = Array.from(text);
  const spans = found.map((q) => [q.start, q.end]).sort((a, b) => a[0] - b[0]);
  const p = el("p", {});
  let at = 0;
  for (const [start, end] of spans) {
    if (end <= at) continue;
    const from = Math.max(start, at);
    if (from > at) p.append(document.createTextNode(chars.slice(at, from).join("")));
    p.append(el("mark", {class: "quote", text: chars.slice(from, end).join("")}));
    at = end;
  }
  if (at < chars.length) p.append(document.createTextNode(chars.slice(at).join("")));
  return p;
}

function showRecordTrace(record) {
  // a past check: its stored trace (LLM calls, tool calls, events) as collapsible steps
  const trace = $("#trace");
  trace.replaceChildren();
  record.trace.llm_calls.forEach((c) => trace.append(el("details", {class: "step"},
    el("summary", {}, el("strong", {text: c.role}),
      el("span", {class: "dim", text: (c.prompt_tokens + c.completion_tokens) + " tokens · " + c.latency_s.toFixed(2) + " s"})),
    el("div", {class: "body"}, el("pre", {text: pretty(c)})))));
  record.trace.tool_calls.forEach((t) => addTraceEvent({kind: "tool", tool: t.tool, query: t.query, role: t.role,
    hits: t.hits.map((pid) => ({passage_id: pid, title: pid.replace(/#\d+$/, ""), score: NaN}))}));
  record.trace.events.forEach((e) => addTraceEvent(e));
  $("#trace-status").textContent = "(stored)";
}

async function readEvents(resp, onEvent) {
  // a server-sent event stream (the Check and Text tabs): onEvent(name, payload) for each event as it
  // arrives; what onEvent throws ends the stream
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      onEvent(name, data ? JSON.parse(data) : {});
    }
  }
}

async function verify(event) {
  event.preventDefault();
  const btn = $("#verify-btn");
  const claim = $("#claim").value.trim();
  if (!claim) return;
  showError($("#check-error"), "");
  btn.disabled = true;
  steps.clear();
  $("#result").hidden = false;
  $("#trace").replaceChildren();
  $("#evidence").replaceChildren();
  $("#verdict").replaceChildren(el("span", {class: "dim", text: "Verifying…"}));
  $("#trace-status").textContent = "(live)";
  try {
    const resp = await api("/v1/verify/stream", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({claim, method: $("#method").value, labels: $("#labels").value, params: {},
        ...minConfidence()})});
    await readEvents(resp, (name, payload) => {
      if (name === "trace") addTraceEvent(payload);
      else if (name === "verdict") {
        showVerdict(payload.record, payload.check_id);
        $("#trace-status").textContent = "(done)";
        history.replaceState(null, "", "#check/" + payload.check_id);
      } else if (name === "error") {
        throw new Error(payload.error + (payload.hint ? " (" + payload.hint + ")" : ""));
      }
    });
  } catch (e) {
    showError($("#check-error"), e.message);
    $("#verdict").replaceChildren(el("span", {class: "error", text: "No verdict."}));
    $("#trace-status").textContent = "(stopped)";
  } finally {
    btn.disabled = false;
  }
}

async function showCheck(checkId) {
  try {
    const record = await (await api("/v1/checks/" + encodeURIComponent(checkId))).json();
    if (record.kind === "text") { location.replace("#text/" + checkId); return; }  // a whole text: the Text tab (text.js)
    $("#claim").value = record.claim;
    $("#result").hidden = false;
    showVerdict(record, checkId);
    showRecordTrace(record);
  } catch (e) { showError($("#check-error"), e.message); }
}

// -- history ------------------------------------------------------------------------------------------
async function loadHistory() {
  const items = await (await api("/v1/checks")).json();
  $("#history").replaceChildren(...(items.length ? items.map((c) => el("li", {},
    el("span", {class: "badge " + c.label, text: c.label.replaceAll("_", " ")}),
    el("a", {class: "grow", href: "#check/" + c.id, text: c.claim}),
    el("span", {class: "dim", text: c.method + " · " + new Date(c.created * 1000).toLocaleString()}),
    el("a", {href: "/v1/checks/" + c.id + "?download=1", download: "check-" + c.id + ".json", text: "JSON"}))) :
    [el("li", {class: "dim", text: "No checks yet."})]));
}

// -- batch --------------------------------------------------------------------------------------------
let polling = null;

async function uploadBatch(event) {
  event.preventDefault();
  const file = $("#batch-file").files[0];
  if (!file) return;
  showError($("#batch-error"), "");
  $("#batch-btn").disabled = true;
  try {
    const q = new URLSearchParams({method: $("#batch-method").value, labels: $("#batch-labels").value});
    const job = await (await api("/v1/jobs?" + q, {method: "POST", headers: {"Content-Type": "application/x-ndjson"},
      body: await file.text()})).json();
    watchJob(job.id);
  } catch (e) {
    showError($("#batch-error"), e.message);
  } finally {
    $("#batch-btn").disabled = false;
  }
}

function renderJob(job) {
  $("#job").hidden = false;
  $("#job-title").textContent = "Job " + job.id.slice(0, 8) + " · " + job.method + " · " + job.labels;
  $("#job-state").textContent = job.state;
  const p = $("#job-progress");
  p.max = Math.max(job.total, 1);
  p.value = job.done + job.failed;
  $("#job-figures").textContent = job.done + " / " + job.total + " done · " + job.failed + " failed · " +
    (job.claims_per_min || 0).toFixed(1) + " claims/min";
  const notes = [];
  if (job.rejected.length) notes.push(job.rejected.length + " bad lines skipped (line " + job.rejected[0].line + ": " + job.rejected[0].reason + ")");
  if (job.error) notes.push(job.error);
  $("#job-notes").textContent = notes.join(" · ");
  $("#job-results").href = job.results;
  $("#job-results").setAttribute("download", "results-" + job.id + ".jsonl");
}

function watchJob(jobId) {
  if (polling) clearInterval(polling);
  const tick = async () => {
    try {
      const job = await (await api("/v1/jobs/" + jobId)).json();
      renderJob(job);
      if (!["queued", "running"].includes(job.state)) { clearInterval(polling); polling = null; loadJobs(); }
    } catch (e) { showError($("#batch-error"), e.message); clearInterval(polling); polling = null; }
  };
  tick();
  polling = setInterval(tick, 1000);
  loadJobs();
}

async function loadJobs() {
  const jobs = await (await api("/v1/jobs")).json();
  $("#jobs").replaceChildren(...(jobs.length ? jobs.map((j) => el("li", {},
    el("span", {class: "pill", text: j.state}),
    el("button", {type: "button", class: "grow linkish", "data-job": j.id,
      text: j.id.slice(0, 8) + " · " + j.method + " · " + j.done + "/" + j.total + " done"}),
    el("a", {href: j.results, download: "results-" + j.id + ".jsonl", text: "results"}))) :
    [el("li", {class: "dim", text: "No jobs yet."})]));
  $("#jobs").querySelectorAll("button[data-job]").forEach((b) => b.addEventListener("click", () => watchJob(b.dataset.job)));
}

// -- article view -------------------------------------------------------------------------------------
async function showArticle(title, pid) {
  const art = $("#article");
  art.replaceChildren(el("p", {class: "dim", text: "Loading…"}));
  try {
    const a = await (await api("/v1/articles/" + encodeURIComponent(title))).json();
    art.replaceChildren(el("h2", {id: "article-title", text: a.title}),
      ...a.passages.map((p) => el("div", {class: "passage" + (p.passage_id === pid ? " hl" : ""), id: "p-" + p.passage_id},
        el("p", {text: p.text}), el("p", {class: "dim", text: p.passage_id}))));
    const hl = art.querySelector(".hl");
    if (hl) hl.scrollIntoView({block: "center"});
  } catch (e) {
    art.replaceChildren(el("p", {class: "error", text: e.message}));
  }
}

// -- routing ------------------------------------------------------------------------------------------
// a fragment typed or pasted by hand may hold a lone "%": shown as it is instead of stopping the page
function decoded(text) {
  try { return decodeURIComponent(text); } catch (e) { return text; }
}

function route() {
  const hash = decoded(location.hash.slice(1) || "check");
  let view = hash.split("/")[0];
  if (!["check", "text", "batch", "history", "article"].includes(view)) view = "check";
  for (const name of ["check", "text", "batch", "history", "article"]) $("#view-" + name).hidden = name !== view;
  for (const name of ["check", "text", "batch", "history"]) {
    const tab = $("#tab-" + name);
    tab.setAttribute("aria-selected", String(name === view));
  }
  if (view === "check" && hash.startsWith("check/")) showCheck(hash.slice(6));
  if (view === "history") loadHistory().catch((e) => $("#history").replaceChildren(el("li", {class: "error", text: e.message})));
  if (view === "batch") loadJobs().catch((e) => showError($("#batch-error"), e.message));
  if (view === "article") {
    const raw = location.hash.slice("#article/".length);
    const [t, q] = raw.split("?");
    const pid = new URLSearchParams(q || "").get("p");
    showArticle(decoded(t), pid);
  }
}

$("#check-form").addEventListener("submit", verify);
$("#claim").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("#check-form").requestSubmit();
});
$("#batch-form").addEventListener("submit", uploadBatch);
$("#article-back").addEventListener("click", (e) => { if (history.length > 1) { e.preventDefault(); history.back(); } });
window.addEventListener("hashchange", route);
loadPickers().catch((e) => showError($("#check-error"), e.message));
loadHealth();
route();
