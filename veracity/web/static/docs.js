// Renders /v1/openapi.json as a list of routes with their parameters, bodies and responses (local, no CDN).
"use strict";
(async () => {
  const box = document.getElementById("routes");
  const add = (tag, text, cls) => { const n = document.createElement(tag); n.textContent = text; if (cls) n.className = cls; return n; };
  try {
    const spec = await (await fetch("/v1/openapi.json", {credentials: "same-origin"})).json();
    box.replaceChildren();
    const schemas = (spec.components || {}).schemas || {};
    for (const [path, ops] of Object.entries(spec.paths)) {
      for (const [verb, op] of Object.entries(ops)) {
        const card = document.createElement("section");
        card.className = "card route";
        const h = document.createElement("h2");
        h.append(add("span", verb.toUpperCase(), "verb"), add("code", path));
        card.append(h, add("p", op.summary || ""));
        for (const p of op.parameters || []) {
          card.append(add("p", p.in + " parameter " + p.name + (p.required ? " (required)" : "") +
            (p.description ? ": " + p.description : ""), "dim"));
        }
        const body = op.requestBody && op.requestBody.content;
        if (body) {
          for (const [type, c] of Object.entries(body)) {
            const ref = c.schema && c.schema.$ref ? c.schema.$ref.split("/").pop() : null;
            card.append(add("p", "body (" + type + ")" + (ref ? ": " + ref : ""), "dim"));
            if (ref && schemas[ref]) card.append(add("pre", JSON.stringify(schemas[ref].properties, null, 2)));
          }
        }
        const codes = Object.entries(op.responses || {}).map(([code, r]) => code + " " + (r.description || "")).join(" · ");
        card.append(add("p", "responses: " + codes, "dim"));
        box.append(card);
      }
    }
  } catch (e) {
    box.replaceChildren(add("p", "could not load /v1/openapi.json: " + e.message, "error"));
  }
})();
