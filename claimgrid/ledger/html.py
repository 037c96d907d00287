"""ledger.html: one self-contained page beside LEDGER.md (no server, no network, no CDN).

Contract: :func:`render_html` ``(report, pages) -> str``. The data (every run's
coordinates and classification, and each run's compact evidence from
:class:`.pages.Pages`) is embedded as one JSON block; vanilla JavaScript filters the runs
by framework, task, condition, model and any classification field, and opens a run to
show its gateway exchanges, tool events, diff, test output and the rules that fired.
Element ids used by the browser test: ``filters``, ``f-<column>`` (one <select> each),
``count``, ``runs`` (the table, one ``tr.run`` per run with ``data-id``), ``detail``.
"""

from __future__ import annotations

import json

COLUMNS = ["framework", "task", "content", "swap_condition", "model", "repeat", "treatment"]
SKIP = {"swap_mentioned"}


def render_html(report, pages) -> str:
    fields = [c for c in report.L.runs.columns if c in _classification_columns(report)]
    cols = COLUMNS + fields
    runs = [
        [r["run_id"], r["evidence_dir"], *[("" if r[c] is None else str(r[c])) for c in cols]]
        for r in sorted(report.rows, key=lambda r: r["run_id"])
    ]
    data = {
        "title": str(report.meta.get("grid_id", report.L.folder.name)),
        "columns": cols,
        "runs": runs,
        "pool": pages.pool,
        "pages": pages.pages,
    }
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True).replace("</", "<\\/")
    return TEMPLATE.replace("__TITLE__", _esc(data["title"])).replace("__DATA__", blob)


def _classification_columns(report) -> list[str]:
    from claimgrid.ledger.names import CLASSIFICATION_KEYS

    keys = [("swap_outcome" if k == "swap" else k) for k in CLASSIFICATION_KEYS if k not in SKIP]
    return keys + ["claimed"] + [f"extra.{k}" for k in report.L.extra_classification_keys]


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>claimgrid ledger __TITLE__</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{padding:10px 16px;background:#f4f4f4;border-bottom:1px solid #ddd}
h1{font-size:17px;margin:0 0 6px}
#filters{display:flex;flex-wrap:wrap;gap:6px 12px}
#filters label{font-size:12px;color:#555;display:flex;flex-direction:column}
#filters select{font-size:12px;max-width:190px}
main{display:flex;height:calc(100vh - 150px)}
#list{flex:1 1 50%;overflow:auto;border-right:1px solid #ddd}
#detail{flex:1 1 50%;overflow:auto;padding:8px 14px}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #eee;padding:3px 6px;text-align:left;font-size:12px;vertical-align:top}
th{position:sticky;top:0;background:#fafafa}
#runs td{white-space:nowrap}
tr.run{cursor:pointer} tr.run:hover{background:#eef4ff} tr.sel{background:#dbe8ff}
.FALSE_SUCCESS{color:#b00020;font-weight:600} .TRUE_SUCCESS{color:#1b5e20}
pre{background:#f7f7f7;padding:6px;white-space:pre-wrap;word-break:break-word;font-size:12px;max-height:320px;overflow:auto}
h2{font-size:15px;margin:14px 0 6px} .muted{color:#777}
</style></head><body>
<header><h1>claimgrid ledger __TITLE__</h1>
<div id="filters"></div><div id="count" class="muted"></div></header>
<main><div id="list"><table id="runs"><thead></thead><tbody></tbody></table></div>
<div id="detail"><p class="muted">Click a run to see its gateway exchanges, tool events, diff, test output and the rules that fired.</p></div></main>
<script id="data" type="application/json">__DATA__</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const P = i => D.pool[i];
const cols = D.columns, shown = ["framework","task","content","swap_condition","model","treatment","claim_vs_outcome","claim_verdict","outcome","injection","process"];
const idx = Object.fromEntries(cols.map((c,i)=>[c,i+2]));
const el = (t, a={}, ...kids) => { const e=document.createElement(t); for (const [k,v] of Object.entries(a)) e.setAttribute(k,v); for (const c of kids) e.append(c); return e; };
const filters = {};
for (const c of cols) {
  const vals = [...new Set(D.runs.map(r=>r[idx[c]]))].sort();
  const s = el("select", {id:"f-"+c}); s.append(el("option",{value:""},"all"));
  for (const v of vals) s.append(el("option",{value:v},v===""?"(none)":v));
  s.addEventListener("change", ()=>{filters[c]=s.value; draw();});
  document.getElementById("filters").append(el("label",{},c.replace("extra.","").replace(/_/g," "),s));
}
const thead = document.querySelector("#runs thead"), tbody = document.querySelector("#runs tbody");
thead.append(el("tr",{},...shown.map(c=>el("th",{},c.replace(/_/g," ")))));
function draw(){
  tbody.textContent="";
  let n=0;
  for (const r of D.runs) {
    if (!Object.entries(filters).every(([c,v])=>!v || r[idx[c]]===v)) continue;
    n++;
    const tr = el("tr",{class:"run","data-id":r[0]}, ...shown.map(c=>el("td",{class:r[idx[c]]},r[idx[c]])));
    tr.addEventListener("click",()=>openRun(r, tr));
    tbody.append(tr);
  }
  document.getElementById("count").textContent = n + " of " + D.runs.length + " runs";
}
function pre(text){ return el("pre",{}, text || "(empty)"); }
function openRun(r, tr){
  document.querySelectorAll("tr.sel").forEach(x=>x.classList.remove("sel")); tr.classList.add("sel");
  const [ex, tools, diff, tests, rules, report] = D.pages[r[0]] || [[],[],0,0,[],0];
  const d = document.getElementById("detail"); d.textContent="";
  d.append(el("h2",{id:"run-title"}, r[0]));
  d.append(el("p",{class:"muted"}, "Evidence folder: ", el("a",{href:r[1]+"/RUN.md"}, r[1]+"/RUN.md")));
  d.append(el("h2",{},"Rules that fired"));
  const rt = el("table",{id:"rules"}, el("tr",{}, el("th",{},"field"), el("th",{},"value"), el("th",{},"rule"), el("th",{},"events.jsonl lines")));
  for (const [f,v,rule,lines] of rules) rt.append(el("tr",{}, el("td",{},P(f)), el("td",{class:P(v)},P(v)), el("td",{},P(rule)), el("td",{},lines.join(", "))));
  d.append(rt);
  d.append(el("h2",{},"Transcript (gateway exchanges)"));
  const et = el("table",{id:"exchanges"}, el("tr",{}, ...["call","served","reported","swap","status","tool calls","answer / error","tool results in the request"].map(h=>el("th",{},h))));
  for (const [ci,srv,rep,sw,st,calls,content,results] of ex) et.append(el("tr",{}, el("td",{},String(ci)), el("td",{},P(srv)), el("td",{},P(rep)), el("td",{},P(sw)), el("td",{},String(st)), el("td",{},P(calls)), el("td",{},pre(P(content))), el("td",{}, ...results.map(x=>pre(P(x))))));
  d.append(et);
  d.append(el("h2",{},"Tool events (harness tool layer)"));
  const tt = el("table",{id:"tools"}, el("tr",{}, ...["tool","args","ok","changed","result / error"].map(h=>el("th",{},h))));
  for (const [t,a,ok,ch,res] of tools) tt.append(el("tr",{}, el("td",{},P(t)), el("td",{},P(a)), el("td",{},ok?"yes":"no"), el("td",{},ch?"yes":"no"), el("td",{},pre(P(res)))));
  d.append(tt);
  d.append(el("h2",{},"Diff"), pre(P(diff)));
  d.append(el("h2",{},"Test output"), pre(P(tests)));
  d.append(el("h2",{},"Agent's final report (no authority)"), pre(P(report)));
}
draw();
</script></body></html>
"""
