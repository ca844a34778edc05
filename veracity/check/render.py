"""How a person reads a check: the terminal view (rich) and one self-contained HTML report.

The report opens offline: no CDN, no external file; the record is embedded as JSON (``<``, ``>`` and ``&``
escaped so no text can close the script element) and the page's script inserts every piece of text with
``textContent``, never as HTML.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from rich.console import Group
from rich.text import Text

from veracity.terminal import control_safe

VERDICT_STYLE = {"SUPPORTED": "bold green", "REFUTED": "bold red", "NOT_ENOUGH_INFO": "bold yellow",
                 "unchecked": "dim", "failed": "bold magenta"}
VERDICT_WORD = {"SUPPORTED": "SUPPORTED", "REFUTED": "REFUTED", "NOT_ENOUGH_INFO": "NOT ENOUGH INFO",
                "unchecked": "no factual claim", "failed": "FAILED"}


def _snippet(text: str, words: int = 40) -> str:
    w = text.split()
    return " ".join(w[:words]) + (" ..." if len(w) > words else "")


def header_line(record: dict[str, Any]) -> str:
    """What the check ran on: model, engine, index (with its dump date), method, date."""
    h = record.get("run") or {}
    idx = h.get("index")
    index = ((f"index {idx.get('name')} ({idx.get('passages') or '?'} passages, dump date "
              f"{idx.get('dump_date') or 'unknown'})") if idx
             else f"no index (evidence {h.get('evidence', 'n/a')})")
    return (f"model {h.get('model') or 'unknown'} on {h.get('engine') or 'unknown engine'} · {index} · "
            f"method {h.get('method') or record.get('method')}, labels {h.get('labels', '3way')} · "
            f"{h.get('date', '')}")


def sentence_facts(s: dict[str, Any]) -> str:
    """A sentence's verified facts beside its worst verdict: ``2 of 3 supported``."""
    if not s.get("verified"):
        return ""
    return f"  ({s['supported']} of {s['verified']} verified claims supported)"


def summary_line(record: dict[str, Any]) -> str:
    s = record["summary"]
    c = s["counts"]
    if s["no_factual_claim"]:
        return (f"No factual claim in this text ({s['claims']} claims: {s['categories']['opinion']} "
                "opinions, "
                f"{s['categories']['not_a_claim']} not claims); nothing to verify.")
    fp = s["factual_precision"]
    decided = c["SUPPORTED"] + c["REFUTED"]
    verified = decided + c["NOT_ENOUGH_INFO"]
    if fp is not None:
        precision = f"factual precision {fp:.2f} over {decided} decided claims"
    elif decided:
        precision = ("factual precision withheld "
                     f"({s.get('precision_withheld') or f'only {decided} decided claims'})")
    else:
        precision = "factual precision n/a (nothing decided)"
    nei = (f"NOT ENOUGH INFO for {c['NOT_ENOUGH_INFO']} of {verified} verified claims "
           f"({c['NOT_ENOUGH_INFO'] / verified:.0%})") if verified else None
    parts = [f"{s['categories']['factual']} factual claims in {s['sentences']} sentences: "
             f"{c['SUPPORTED']} supported, {c['REFUTED']} refuted, {c['NOT_ENOUGH_INFO']} not enough info"
             + (f", {c['failed']} failed" if c["failed"] else ""), precision] + ([nei] if nei else [])
    if "factscore" in s:
        fs = s["factscore"]
        parts.append(f"FActScore (gamma={s['factscore_gamma']}) " + (f"{fs:.2f}" if fs is not None
                                                                     else "n/a"))
    if s.get("dropped"):
        parts.append(f"{s['dropped']} claim{'s' if s['dropped'] != 1 else ''} dropped (outside their "
                     "sentence after one re-ask, a repeat, or past a sentence's limit; `dropped` in --json "
                     "says which)")
    fb = sum(s["fallbacks"].values())
    if fb:
        parts.append(f"{fb} extraction replies fell back "
                     f"({', '.join(f'{k}: {v}' for k, v in s['fallbacks'].items() if v)})")
    return "; ".join(parts)


def _quote_lines(c: dict[str, Any]) -> list[Text]:
    """A claim's quotes (quotes=show|check: found in its passage or not), its grounding, and the flags: quotes
    that never mention the claim's key terms, words the explanation attributes to passages that lack them."""
    out: list[Text] = []
    for q in c.get("quotes") or []:
        mark = ("found" + (" (at the chunk's edge)" if q.get("at_edge") else ""), "green") if q["found"] \
            else ("NOT in the passage", "bold red")
        out.append(Text.assemble("      quote ", (f"[{control_safe(q['passage_id'])}] ", "cyan"),
                                 f"\u201c{control_safe(q['text'])}\u201d  ", mark))
    if c.get("grounding"):
        out.append(Text.assemble("      ", (c["grounding"],
                                            "green" if c["grounding"] == "grounded" else "bold red")))
    flag = (c.get("quote_terms") or {}).get("flag")
    if flag:
        out.append(Text(f"      warning: {control_safe(flag)}", style="yellow"))
    for lack in c.get("explanation_lacks") or []:
        out.append(Text(f"      warning: {control_safe(lack)}", style="yellow"))
    return out


def render_text(record: dict[str, Any]) -> Group:
    """The text, each sentence marked by its verdict, its numbered claims under it with the cited passages."""
    parts: list[Any] = [Text(f"veracity check · {control_safe(record['id'])} · {record['method']}",
                             style="bold"),
                        Text(control_safe(header_line(record)), style="dim")]
    n = 0
    for s in record["sentences"]:
        v = s["verdict"]
        parts.append(Text.assemble(("\n" + f"[{VERDICT_WORD[v]}] ", VERDICT_STYLE[v]),
                                   control_safe(s["text"]),
                                   (sentence_facts(s), "dim")))
        for c in s["claims"]:
            n += 1
            if c["category"] != "factual":
                parts.append(Text(f"   {n}. {control_safe(c['text'])}  ({c['category'].replace('_', ' ')}, "
                                  "not checked)",
                                  style="dim"))
                continue
            label = c.get("label")
            if label is None:
                parts.append(Text.assemble(f"   {n}. {control_safe(c['text'])}  ", ("FAILED",
                                                                                    VERDICT_STYLE["failed"]),
                                           f" {control_safe(c.get('error', ''))}"))
                continue
            cited = ", ".join(control_safe(e["passage_id"]) for e in c["evidence"]) or "no passage cited"
            conf = c.get("confidence")
            parts.append(Text.assemble(f"   {n}. {control_safe(c['text'])}  ", (VERDICT_WORD[label],
                                                                                VERDICT_STYLE[label]),
                                       *([(f"  confidence {conf:.2f}", "dim")] if conf is not None else []),
                                       *([("  ungrounded",
                                           "yellow")] if c.get("grounding") == "ungrounded" else []),
                                       (f"  [{cited}]", "cyan")))
            for e in c["evidence"]:
                parts.append(Text.assemble("      ", (f"[{control_safe(e['passage_id'])}] ", "cyan"),
                                           (control_safe(e["title"]), "bold"),
                                           f": {control_safe(_snippet(e['text']))}"))
            parts.extend(_quote_lines(c))
    parts.append(Text("\n" + summary_line(record), style="bold"))
    unsure = record["summary"].get("uncertain") or []
    if unsure:
        parts.append(Text(f"Uncertain ({len(unsure)}: abstained, or confidence below "
                          f"{record['summary'].get('uncertain_below', 0.7):.2f}):", style="bold yellow"))
        for u in unsure:
            how = "abstained, would say " if u["abstained"] else ""
            conf = f"{u['confidence']:.2f}" if u["confidence"] is not None else "n/a"
            parts.append(Text(f"   {u['n']}. {control_safe(u['text'])}  ({how}{VERDICT_WORD[u['label']]}, "
                              f"confidence {conf}"
                              + (", ungrounded" if u.get("grounding") == "ungrounded" else "") + ")",
                              style="yellow"))
    return Group(*parts)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>veracity check · __TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:16px/1.6 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
.s{cursor:pointer;padding:.1rem .15rem;border-radius:.2rem}
.SUPPORTED{background:#d8f3dc}.REFUTED{background:#ffd6d6}.NOT_ENOUGH_INFO{background:#fff3bf}
.failed{background:#f0d9ff}.unchecked{background:none;color:#666}.s.sel{outline:2px solid #333}
#text{border:1px solid #ddd;padding:1rem;border-radius:.4rem}
#summary{margin:1rem 0;font-weight:600}.claim{border-top:1px solid #eee;padding:.5rem 0}
.lab{font-weight:700;padding:0 .3rem;border-radius:.2rem}.ev{margin:.3rem 0 .3rem 1.5rem;font-size:.9rem}
.ev b{color:#035}details{margin-left:1.5rem;font-size:.85rem}pre{white-space:pre-wrap}
.hdr{color:#555;font-size:.9rem}.legend span{margin-right:.6rem;padding:0 .3rem}\
.warn{color:#8a5a00}.ok{color:#1b7a2f}.bad{color:#b00020;font-weight:700}
</style></head><body>
<h1>veracity check</h1>
<p class="legend"><span class="SUPPORTED">supported</span><span class="REFUTED">refuted</span>
<span class="NOT_ENOUGH_INFO">not enough info</span><span class="failed">failed</span>
<span class="unchecked">no factual claim</span> · click a sentence for its claims and evidence</p>
<p id="header" class="hdr"></p><div id="text"></div><div id="summary"></div><div id="claims"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
(function(){
var rec=JSON.parse(document.getElementById('data').textContent);
var words={SUPPORTED:'SUPPORTED',REFUTED:'REFUTED',NOT_ENOUGH_INFO:'NOT ENOUGH INFO',failed:'FAILED',\
unchecked:'no factual claim'};
function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;\
if(text!=null)e.textContent=text;return e;}
var box=document.getElementById('text'),pos=0,spans=[];
rec.sentences.forEach(function(s,i){
  if(s.start>pos)box.appendChild(document.createTextNode(rec.text.slice(pos,s.start)));
  var sp=el('span','s '+s.verdict,rec.text.slice(s.start,s.end));\
sp.title=words[s.verdict]+(s.verified?' ('+s.supported+' of '+s.verified+' supported)':'');
  sp.addEventListener('click',function(){show(i);});box.appendChild(sp);spans.push(sp);pos=s.end;});
if(pos<rec.text.length)box.appendChild(document.createTextNode(rec.text.slice(pos)));
document.getElementById('summary').textContent=__SUMMARY__;
document.getElementById('header').textContent=__HEADER__;
function show(i){
  spans.forEach(function(x,j){x.classList.toggle('sel',j===i);});
  var s=rec.sentences[i],out=document.getElementById('claims');out.textContent='';
  out.appendChild(el('h2',null,'Sentence '+s.index+': '+words[s.verdict]+\
(s.verified?' ('+s.supported+' of '+s.verified+' verified claims supported)':'')));
  if(!s.claims.length)out.appendChild(el('p',null,'No claim was extracted from this sentence.'));
  s.claims.forEach(function(c,k){
    var d=el('div','claim');var head=el('div');head.appendChild(el('span',null,(k+1)+'. '+c.text+' '));
    if(c.category!=='factual'){\
head.appendChild(el('i',null,'('+c.category.replace('_',' ')+', not checked)'));d.appendChild(head);\
out.appendChild(d);return;}
    head.appendChild(el('span','lab '+(c.label||'failed'),c.label?words[c.label]:'FAILED'));
    if(c.confidence!=null)head.appendChild(el('span',null,' confidence '+c.confidence.toFixed(2)+\
(c.confidence<(rec.summary.uncertain_below||0.7)?' (uncertain)':'')));
    if(c.abstained)head.appendChild(el('span',null,' abstained: would say '+words[c.abstained_label]));
    if(c.grounding==='ungrounded')head.appendChild(el('span',null,' ungrounded'));
    d.appendChild(head);
    if(c.error)d.appendChild(el('div',null,c.error));
    if(c.explanation)d.appendChild(el('div',null,c.explanation));
    (c.explanation_lacks||[]).forEach(function(x){d.appendChild(el('div','warn','warning: '+x));});
    (c.quotes||[]).forEach(function(q){var p=el('div','ev q');\
p.appendChild(el('b',null,'quote ['+q.passage_id+'] '));
      p.appendChild(document.createTextNode('\u201c'+q.text+'\u201d '));\
p.appendChild(el('span',q.found?'ok':'bad',\
q.found?(q.at_edge?'found (at the chunk\'s edge)':'found'):'NOT in the passage'));d.appendChild(p);});
    if(c.grounding)d.appendChild(el('div',c.grounding==='grounded'?'ok':'bad',c.grounding));
    if(c.quote_terms&&c.quote_terms.flag)d.appendChild(el('div','warn','warning: '+c.quote_terms.flag));
    (c.evidence||[]).forEach(function(e){var p=el('div','ev');\
p.appendChild(el('b',null,'['+e.passage_id+'] '+e.title+': '));
      p.appendChild(document.createTextNode(e.text));d.appendChild(p);});
    if(c.label&&!(c.evidence||[]).length)d.appendChild(el('div','ev','No passage cited.'));
    if(c.trace){var t=el('details');t.appendChild(el('summary',null,\
'trace: '+c.trace.summary.llm_calls+' LLM calls, '+c.trace.summary.tool_calls+' tool calls'));
      t.appendChild(el('pre',null,JSON.stringify(c.trace,null,1)));d.appendChild(t);}
    out.appendChild(d);});
}
var first=rec.sentences.findIndex(function(s){return s.verdict==='REFUTED';});\
if(rec.sentences.length)show(first<0?0:first);
})();
</script></body></html>
"""


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no ``<``, ``>`` or ``&`` left to end it or open a comment."""
    return (json.dumps(obj, ensure_ascii=False).replace("&", "\\u0026").replace("<", "\\u003c")
            .replace(">", "\\u003e").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def report_html(record: dict[str, Any]) -> str:
    """One self-contained HTML page for a checked text (no network needed to open it). The page embeds the
    record without the run's endpoint: a report is shared, the address of the server it ran on is not part of
    it (it stays in the JSON), and the page names no URL at all."""
    run = record.get("run")
    if isinstance(run, dict) and "endpoint" in run:
        record = {**record, "run": {k: v for k, v in run.items() if k != "endpoint"}}
    values = {"__TITLE__": html.escape(str(record["id"])), "__SUMMARY__": _script_json(summary_line(record)),
              "__HEADER__": _script_json(header_line(record)), "__DATA__": _script_json(record)}
    # one pass over the template, so a placeholder's name inside the text is never substituted
    return re.sub("__TITLE__|__SUMMARY__|__HEADER__|__DATA__", lambda m: values[m.group(0)], _PAGE)
