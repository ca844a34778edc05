// The Text tab: paste a text, watch its sentences and claims appear and light up as verdicts arrive
// (POST /v1/check/stream), open a claim's evidence and trace; a past text check opens at #text/<id>.
// Every piece of text is inserted as text (textContent), never as HTML. Uses app.js's $, el, api, pretty.
"use strict";

const textState = {sentences: [], claims: new Map(), order: [], selected: null};
const WORDS = {SUPPORTED: "SUPPORTED", REFUTED: "REFUTED", NOT_ENOUGH_INFO: "NOT ENOUGH INFO", failed: "FAILED",
  unchecked: "no factual claim", pending: "checking…"};

function textReset() {
  textState.sentences = []; textState.claims = new Map(); textState.order = []; textState.selected = null;
  $("#text-view").replaceChildren(); $("#text-claims").replaceChildren(); $("#text-summary").textContent = "";
  $("#text-actions").replaceChildren();
}

function worst(labels) {
  for (const l of ["REFUTED", "NOT_ENOUGH_INFO", "SUPPORTED"]) if (labels.includes(l)) return l;
  return labels.length ? "failed" : "unchecked";
}

function renderTextView(text) {
  const box = $("#text-view");
  const nodes = [];
  let pos = 0;
  textState.sentences.forEach((s) => {
    if (s.start > pos) nodes.push(document.createTextNode(text.slice(pos, s.start)));
    const span = el("span", {class: "sent pending", id: "sent-" + s.index, title: "sentence " + s.index,
      text: text.slice(s.start, s.end), tabindex: "0"});
    span.addEventListener("click", () => selectSentence(s.index));
    span.addEventListener("keydown", (e) => { if (e.key === "Enter") selectSentence(s.index); });
    nodes.push(span);
    pos = s.end;
  });
  if (pos < text.length) nodes.push(document.createTextNode(text.slice(pos)));
  box.replaceChildren(...nodes);
}

function paintSentence(index) {
  const s = textState.sentences.find((x) => x.index === index);
  const node = $("#sent-" + index);
  if (!s || !node || !s.claims) return;
  const factual = s.claims.filter((c) => c.category === "factual").map((c) => textState.claims.get(c.id));
  let verdict;
  if (factual.some((c) => !c.record && !c.error)) verdict = factual.length ? "pending" : "unchecked";
  else verdict = worst(factual.filter((c) => c.record && c.record.label).map((c) => c.record.label));
  if (!factual.length) verdict = "unchecked";
  node.className = "sent " + verdict + (textState.selected === index ? " sel" : "");
  node.title = "sentence " + index + ": " + WORDS[verdict];
  node.dataset.verdict = verdict;
}

function setClaims(index, claims) {
  const s = textState.sentences.find((x) => x.index === index);
  if (!s) return;
  s.claims = claims;
  claims.forEach((c) => { if (!textState.claims.has(c.id)) { textState.claims.set(c.id, {claim: c, record: null, trace: []}); textState.order.push(c.id); } });
  renderClaims();
  paintSentence(index);
}

function claimItem(id, n) {
  const st = textState.claims.get(id);
  const c = st.claim;
  const li = el("li", {id: "claim-" + CSS.escape(id), class: c.category === "factual" ? "factual" : "other", "data-sentence": id.split("#s").pop().split("c")[0]});
  if (c.category !== "factual") {
    li.append(el("span", {text: c.text + " "}), el("span", {class: "dim", text: "(" + c.category.replaceAll("_", " ") + ", not checked)"}));
    return li;
  }
  const label = st.record ? (st.record.label || "failed") : "pending";
  const d = el("details", {class: "claim"});
  d.append(el("summary", {}, el("span", {text: c.text}), el("span", {class: "badge " + label, text: WORDS[label] || label})));
  const body = el("div", {class: "body"});
  if (st.record && st.record.error) body.append(el("p", {class: "error", text: st.record.error}));
  if (st.record && st.record.label) {
    body.append(el("p", {text: st.record.explanation || "(no explanation)"}));
    body.append(...evidenceCards(st.record));  // app.js: the Check tab's cards
    const s = st.record.trace.summary;
    body.append(el("details", {class: "trace"}, el("summary", {text: "trace: " + s.llm_calls + " LLM calls, " + s.tool_calls + " tool calls"}),
      el("pre", {text: pretty(st.record.trace)})));
  } else if (st.trace.length) {
    body.append(el("p", {class: "dim", text: st.trace.length + " steps so far: " + st.trace[st.trace.length - 1].kind}));
  }
  d.append(body);
  li.append(d);
  return li;
}

function renderClaims() {
  const list = $("#text-claims");
  const open = new Set([...list.querySelectorAll("details.claim[open]")].map((d) => d.parentNode.id));
  const ids = textState.selected === null ? textState.order :
    textState.order.filter((id) => id.includes("#s" + textState.selected + "c"));
  list.replaceChildren(...(ids.length ? ids.map((id, i) => claimItem(id, i + 1)) :
    [el("li", {class: "other", text: textState.selected === null ? "Extracting claims…" : "No claim was extracted from this sentence."})]));
  list.querySelectorAll("details.claim").forEach((d) => { if (open.has(d.parentNode.id)) d.open = true; });
}

function selectSentence(index) {
  textState.selected = textState.selected === index ? null : index;
  textState.sentences.forEach((s) => paintSentence(s.index));
  renderClaims();
}

function textSummary(record, checkId) {
  const s = record.summary, c = s.counts;
  $("#text-summary").textContent = s.no_factual_claim ? "No factual claim in this text: nothing to verify." :
    s.categories.factual + " factual claims: " + c.SUPPORTED + " supported, " + c.REFUTED + " refuted, " +
    c.NOT_ENOUGH_INFO + " not enough info" + (c.failed ? ", " + c.failed + " failed" : "") +
    " · factual precision " + (s.factual_precision === null ? "n/a" : s.factual_precision.toFixed(2));
  if (checkId) $("#text-actions").replaceChildren(el("a", {href: "#text/" + checkId, id: "text-permalink", text: "Permalink"}),
    el("a", {href: "/v1/checks/" + checkId + "?download=1", download: "check-" + checkId + ".json", text: "Download JSON"}));
}

function showTextRecord(record, checkId) {
  textReset();
  $("#text-result").hidden = false;
  $("#text-input").value = record.text;
  textState.sentences = record.sentences.map((s) => ({index: s.index, start: s.start, end: s.end, text: s.text}));
  renderTextView(record.text);
  record.sentences.forEach((s) => {
    s.claims.forEach((c) => { textState.claims.set(c.id, {claim: c, record: c.category === "factual" ? c : null, trace: []}); textState.order.push(c.id); });
    const st = textState.sentences.find((x) => x.index === s.index);
    st.claims = s.claims;
  });
  textState.sentences.forEach((s) => paintSentence(s.index));
  renderClaims();
  textSummary(record, checkId);
}

async function checkText(event) {
  event.preventDefault();
  const text = $("#text-input").value;
  if (!text.trim()) return;
  const btn = $("#text-btn");
  showError($("#text-error"), "");
  btn.disabled = true;
  textReset();
  $("#text-result").hidden = false;
  $("#text-status").textContent = "(live)";
  try {
    const resp = await api("/v1/check/stream", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({text, method: $("#text-method").value, labels: $("#text-labels").value, params: {}})});
    await readEvents(resp, (name, p) => {
      if (name === "sentences") { textState.sentences = p.sentences; renderTextView(text); renderClaims(); }
      else if (name === "claims") setClaims(p.sentence, p.claims);
      else if (name === "extracted") { p.sentences.forEach((s) => setClaims(s.index, s.claims)); }
      else if (name === "trace") { const st = textState.claims.get(p.claim_id); if (st) { st.trace.push(p.event); } }
      else if (name === "claim") {
        const st = textState.claims.get(p.claim_id);
        if (st) { st.record = p.record; renderClaims(); paintSentence(Number(p.claim_id.split("#s").pop().split("c")[0])); }
      } else if (name === "done") {
        showTextRecord(p.record, p.check_id);
        $("#text-status").textContent = "(done)";
        history.replaceState(null, "", "#text/" + p.check_id);
      } else if (name === "error") throw new Error(p.error + (p.hint ? " (" + p.hint + ")" : ""));
    });
  } catch (e) {
    showError($("#text-error"), e.message);
    $("#text-status").textContent = "(stopped)";
  } finally {
    btn.disabled = false;
  }
}

async function openTextCheck(checkId) {
  try {
    const record = await (await api("/v1/checks/" + encodeURIComponent(checkId))).json();
    showTextRecord(record, checkId);
    $("#text-status").textContent = "(stored)";
  } catch (e) { showError($("#text-error"), e.message); }
}

function textRoute() {
  let hash = location.hash.slice(1);
  try { hash = decodeURIComponent(hash); } catch (e) { /* a malformed fragment: kept as it is */ }
  if (hash.startsWith("text/")) openTextCheck(hash.slice(5));
}

async function textPickers() {
  // the same pickers as the Check tab (filled by app.js from /v1/methods)
  const info = await (await api("/v1/methods")).json();
  $("#text-method").replaceChildren(...info.methods.map((x) => el("option", {value: x.name, title: x.summary,
    disabled: x.available ? null : true, selected: x.name === info.default_method ? true : null},
    x.name + (x.available ? "" : " (needs an index)"))));
  $("#text-labels").replaceChildren(...info.labels.map((x) => el("option", {value: x.name, text: x.name})));
}

$("#text-form").addEventListener("submit", checkText);
$("#text-input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("#text-form").requestSubmit();
});
window.addEventListener("hashchange", textRoute);
textPickers().catch((e) => showError($("#text-error"), e.message));
textRoute();
