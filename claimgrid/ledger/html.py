"""ledger.html: one self-contained viewer beside LEDGER.md (no server, no network, no CDN).

Contract: :class:`ViewerPages` collects one compact evidence page per run while the ledger
is loaded (``add(record, events, patch, rules)``); :func:`render_html` ``(report, pages) ->
str`` writes the page. The summary and headline are the report's own
(``Report.summary()``, ``Report.headline()``: the same text as LEDGER.md), shown first.

Everything a run wrote is data, never markup: the data is one JSON block in ``<script
id="data" type="application/json">`` with ``<``, ``>``, ``&`` and every non-ASCII character
(U+2028/2029 and lone surrogates included) as ``\\u`` escapes, so no text can close the
block or open a comment; the script builds the page with ``textContent`` and
``createElement`` only (no ``innerHTML``). Long texts are cut (the full evidence stays in
the run's folder) and every text goes through one shared string pool, because frameworks
that behaved alike produce the same texts: a 1,760-run ledger stays a file a browser opens
at once.

What the page offers (element ids are what tests/grid/ledger/test_ledger_browser.py
drives): a run table (``runs``, one ``tr.run`` per run with ``data-id``; the coordinate
columns stay in view when it scrolls sideways), sortable by any column (click a ``th``),
free-text search (``q``) over the final reports, transcripts, tool output, diffs, test
output and stderr; filters ``f-<column>``, the first few shown, the rest under ``more``;
``count``; the reading pane ``detail`` (the summary and headline, or one run: its
classification with the rule of each value, fault facts, the transcript in order, the
harness tool events, a coloured diff, test output, stderr and runtime errors, and the same
cell on every framework side by side). The URL fragment holds the state
(``#run=<id>&model=obedient&q=text&sort=outcome``), so a link opens the same view.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from claimgrid.ledger.columns import COORDINATE, FIELD, numeric_columns, treatment, viewer_columns
from claimgrid.ledger.load import evidence_dir, stored
from claimgrid.ledger.rules import explain
from claimgrid.ledger.sections import headline, summary
from claimgrid.store.record import RunRecord

# The viewer's columns are the ledger's (claimgrid.ledger.columns): its coordinates, the swap
# treatment, then every classification column. Of those, by name (a name that is no ledger
# column is an error when the page is rendered, never an empty column):
# the run table's columns after the coordinates; every other column is a filter only,
SHOWN_FIELDS = ["claim_vs_outcome", "claim_verdict", "outcome", "injection", "process"]
# the filters always visible (the rest are under "more filters"),
PRIMARY = ["framework", "task", "content", "swap_condition", "model", "claim_vs_outcome", "outcome"]
# and the columns the same cell shows side by side across frameworks.
SIDE = ["claim_vs_outcome", "claim_verdict", "outcome", "injection", "legitimate", "process", "swap_outcome"]
CUT = {"content": 1500, "result": 600, "args": 400, "diff": 6000, "tests": 2000, "report": 2000, "stderr": 2000,
       "prompt": 2500}  # fmt: skip


def _cut(text, n: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[:n] + f"… [{len(text) - n} more characters in the evidence folder]"


def _text_of(content) -> str:
    """A chat message's content as text (a string, or a list of parts with ``text``)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _first_request(ev_dir: Path) -> list[dict]:
    """The messages of the run's first model request (system prompt and task), from gateway.jsonl."""
    try:
        with open(ev_dir / "gateway.jsonl", encoding="utf-8", errors="replace") as f:
            line = f.readline()
        messages = (json.loads(line).get("request") or {}).get("messages") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [m for m in messages if isinstance(m, dict)]


class ViewerPages:
    """Compact per-run evidence for ledger.html, sharing one string pool.

    A page is ``[exchanges, tools, diff, tests, rules, report, stderr, errors, faults,
    prompt, delegation id, fault account]`` of pool references (:meth:`s`)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.pool: list[str] = []
        self.index: dict[str, int] = {}
        self.pages: dict[str, list] = {}
        self._did = ""

    def _pooled(self, text: str) -> int:
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.pool)
            self.pool.append(text)
        return i

    def s(self, text) -> int | list[int]:
        """``text`` as a pool index; a text holding this run's delegation id (every prompt and
        trace does, and nothing else differs between them) as the list of the indices of its
        pieces around the id, which the page joins with the id again."""
        text = "" if text is None else str(text)
        if self._did and self._did in text:
            return [self._pooled(part) for part in text.split(self._did)]
        return self._pooled(text)

    def add(
        self,
        record: RunRecord,
        events: list[dict] | None,
        patch: str | None,
        rules: list[dict] | None = None,
        fault: list[str] | None = None,
    ) -> None:
        """One run's page. ``rules``: :func:`claimgrid.ledger.rules.explain`'s entries (the
        rule of each recorded value; computed here when not given); ``fault``: the ledger's
        account of a fault run in lines (the fault, the call it hit, what the framework did),
        shown above the recorded fault facts."""
        events = events or []
        self._did = str((record.facts.delegation_id if record.facts else None) or "")
        s = self.s
        ex = []
        for e in sorted(
            (e for e in events if e.get("source") == "gateway" and e.get("kind") == "exchange"),
            key=lambda e: e.get("call_index") or 0,
        ):
            calls = [[s(c.get("name")), s(_cut(c.get("arguments"), CUT["args"]))] for c in e.get("tool_calls") or []]
            err = e.get("error")
            ex.append(
                [
                    e.get("call_index"),
                    s(e.get("served_model")),
                    s(e.get("reported_model")),
                    s(e.get("swap")),
                    e.get("status"),
                    calls,
                    s(_cut(e.get("content"), CUT["content"])),
                    s(_cut(json.dumps(err, sort_keys=True) if err else "", CUT["content"])),
                    [s(_cut(t, CUT["result"])) for t in e.get("tool_results") or []],
                ]
            )
        tools = [
            [
                # An agent's own tool, read from the gateway transcript, says so.
                s(e.get("tool") if e.get("kind") == "tool_call" else f"{e.get('tool')} (agent-side)"),
                s(_cut(json.dumps(e.get("args"), sort_keys=True), CUT["args"])),
                1 if e.get("ok") else 0,
                1 if e.get("changed_workspace") else 0,
                s(_cut(e.get("result") if e.get("ok") else e.get("error"), CUT["result"])),
            ]
            for e in events
            if (e.get("source"), e.get("kind")) in (("tools", "tool_call"), ("gateway", "agent_tool_call"))
        ]
        from claimgrid.ledger.pages import test_provenance

        tests = next((e for e in events if e.get("source") == "verifier" and e.get("kind") == "tests"), None)
        # A cached result says so above its output (the output is the earlier run's).
        test_text = (f"[{test_provenance(tests)}]\n" if tests and tests.get("cached") else "") + (
            (tests or {}).get("output_tail") or ""
        )
        report: dict = next((e for e in reversed(events) if e.get("source") == "agent"), {})
        proc: dict = next((e for e in reversed(events) if e.get("source") == "process"), {})
        exc = proc.get("adapter_exception") or {}
        errors = [
            s(_cut(f"{e.get('type')}: {e.get('message')}", CUT["result"]))
            for e in events
            if e.get("source") == "runtime" and e.get("kind") == "error"
        ]
        if exc:
            errors.append(s(_cut(f"adapter exception {exc.get('type')}: {exc.get('message')}", CUT["result"])))
        faults = stored(record.faults)  # the recorded fault facts, as the line held them
        ev_dir = self.folder / evidence_dir(record)
        prompt = [
            [s(m.get("role")), s(_cut(_text_of(m.get("content")), CUT["prompt"]))] for m in _first_request(ev_dir)
        ]
        self.pages[record.run_id] = [
            ex,
            tools,
            s(_cut(patch, CUT["diff"])),
            s(_cut(test_text, CUT["tests"])),
            [
                [
                    s(r["field"]),
                    s(r["value"] if isinstance(r["value"], str) else json.dumps(r["value"])),
                    s(r["rule"]),
                    r["lines"],
                ]
                for r in (explain(record, events) if rules is None else rules)
            ],  # fmt: skip
            s(_cut(report.get("text"), CUT["report"])),
            s(_cut(proc.get("stderr_tail"), CUT["stderr"])),
            errors,
            [[s(k), s(v if isinstance(v, str) else json.dumps(v))] for k, v in faults.items()],
            prompt,
            self._did,
            [s(line) for line in fault or []],
        ]


def data_json(data) -> str:
    """JSON that is inert inside ``<script type="application/json">``: ASCII only, and
    ``<``, ``>``, ``&`` escaped, so no string can end the element or start a comment."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _columns(report) -> dict[str, list[str]]:
    """The viewer's columns by role, from the ledger's column spec; KeyError naming a column
    this module names that the spec does not hold."""
    coords, treat = viewer_columns(COORDINATE), treatment()
    cols = coords + [treat.name] + viewer_columns(FIELD) + [f"extra.{k}" for k in report.L.extra_classification_keys]
    out = {
        "columns": cols,
        "coordinates": coords,
        "cell": coords[1:],  # a cell is every coordinate but the framework, the first
        "shown": coords + SHOWN_FIELDS + [treat.name],
        "primary": PRIMARY,
        "side": SIDE + [treat.name],
        "numeric": [name for name in cols if name in numeric_columns()],
    }
    for role, names in out.items():
        for name in names:
            if name not in cols:
                raise KeyError(
                    f"ledger.html's {role} column {name!r} is not a ledger column (claimgrid.ledger.columns)"
                )
    return out


def render_html(report, pages: ViewerPages) -> str:
    roles = _columns(report)
    cols = roles["columns"]
    rows = sorted(report.rows, key=lambda r: r["run_id"])
    # Each column's distinct values once; a run row holds their indices (and an evidence
    # folder only when it is not the usual runs/<run id>).
    values = {c: sorted({"" if r[c] is None else str(r[c]) for r in rows}) for c in cols}
    pos = {c: {v: i for i, v in enumerate(vs)} for c, vs in values.items()}
    runs = [
        [
            r["run_id"],
            "" if r["evidence_dir"] == f"runs/{r['run_id']}" else r["evidence_dir"],
            *[pos[c]["" if r[c] is None else str(r[c])] for c in cols],
        ]
        for r in rows
    ]
    grid_id = str(report.meta.get("grid_id", report.L.folder.name))
    data = {
        "title": grid_id,
        **roles,
        "values": values,
        "frameworks": list(report.frameworks),
        "runs": runs,
        "pool": pages.pool,
        "pages": pages.pages,
        "summary": summary(report) if report.rows else "",
        "headline": headline(report) if report.rows else "",
    }
    title = grid_id.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate, visibly
    fill = {"__TITLE__": _esc(title), "__DATA__": data_json(data)}
    # One pass over the template's own markers: a marker inside the data is never replaced.
    return "".join(fill.get(part, part) for part in _PARTS)


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


TEMPLATE = (Path(__file__).with_name("viewer.html")).read_text(encoding="utf-8")
_PARTS = re.split(r"(__TITLE__|__DATA__)", TEMPLATE)
