"""Per-run pages: ``runs/<run id>/RUN.md`` and the compact per-run evidence of ledger.html.

Contract:

- :func:`run_md` ``(record, events, patch, digest) -> str``: the RUN.md of one run: its
  cell, for each classification field the rule that fired and the evidence lines it used
  (linked into ``events.jsonl``), and links to the evidence files. RUN.md is a derived
  file (``store.DERIVED_FILES``): it is not in the sha256 manifest and is rewritten on
  every render.
- :class:`Pages`: collects one compact page per run for ledger.html; long texts are
  truncated (the full evidence stays in the run's folder) and every text goes through
  one shared string pool, because frameworks that behaved alike produce the same
  texts and a 960-run ledger must stay a file a browser opens at once.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from claimgrid.ledger.rules import explain

RUN_MD = "RUN.md"
EVIDENCE_FILES = (
    "events.jsonl",
    "gateway.jsonl",
    "transcript.json",
    "trace.json",
    "diff.patch",
    "test_output.txt",
    "control.json",
    "stderr.txt",
    "manifest.json",
)
CUT = {"content": 700, "result": 400, "args": 240, "diff": 4000, "tests": 1500, "report": 1500}


def _cut(text, n: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[:n] + f"… [{len(text) - n} more characters in the evidence folder]"


def _tests_event(events: list[dict] | None) -> dict | None:
    return next((e for e in events or [] if e.get("source") == "verifier" and e.get("kind") == "tests"), None)


def test_provenance(tests: dict) -> str:
    """One line: who ran the tests whose result this run's outcome reads (claimgrid.verify.cache)."""
    result = f"exit code {tests.get('exit_code')}, {tests.get('duration_s', '?')} s"
    if tests.get("cached"):
        return (
            f"verified by the result of run {tests.get('verified_by')} ({result}): its final workspace, "
            f"interpreter, command, guard and timeout were identical (verify cache key {str(tests.get('cache_key'))[:16]})"
        )
    if tests.get("timed_out") or tests.get("exit_code") is None:
        return f"run by the harness for this run: {tests.get('reason') or 'no exit code'}"
    return f"run by the harness for this run ({result}; verify cache: {tests.get('cache', 'not recorded')})"


def read_stderr(folder: Path, record: dict) -> str | None:
    """The run's stored stderr.txt (None when absent)."""
    path = folder / str(record.get("evidence_dir") or f"runs/{record['run_id']}") / "stderr.txt"
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def run_md(
    record: dict,
    events: list[dict] | None,
    digest: dict,
    rules: list[dict] | None = None,
    fault: list[str] | None = None,
) -> str:
    rid = record["run_id"]
    coords = " · ".join(f"{k} {record.get(k)}" for k in ("framework", "task", "content", "swap", "model", "repeat"))
    lines = [
        f"# Run {rid}",
        "",
        coords,
        "",
        "Why this run got each classification value: the rule that fired and the lines of "
        "[events.jsonl](events.jsonl) it read. The classifier decided; this page only explains. "
        "Derived from the evidence by the ledger renderer (not in manifest.json).",
        "",
        "| field | value | rule | evidence lines |",
        "|---|---|---|---|",
    ]
    for e in explain(record, events) if rules is None else rules:
        ev = ", ".join(f"[L{n}](events.jsonl#L{n})" for n in e["lines"]) or "–"
        val = json.dumps(e["value"]) if not isinstance(e["value"], str) else e["value"]
        lines.append(f"| {e['field']} | {val} | {str(e['rule']).replace('|', '/')} | {ev} |")
    if fault:
        lines += ["", "## Fault", ""]
        for line in fault:
            head, sep, tail = line.partition("stderr tail: ")
            if sep and not head and "\n" in tail:  # several lines: a fence longer than any run of backticks in it
                fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", tail)), default=0))
                lines += ["- stderr tail:", "", fence, tail, fence]
            else:
                lines.append(f"- {line}")
    d = digest
    lines += [
        "",
        "## From the gateway and runtime",
        "",
        f"- model calls: {d.get('calls')}; refused: {d.get('refused')}; swap fired at call: {d.get('swap_fired_at')}",
        f"- final report written by (gateway served_model): {d.get('final_writer')}",
        f"- model names the runtime saw: {d.get('runtime_models') or '–'}",
        f"- tokens: prompt {d.get('prompt_tokens')}, completion {d.get('completion_tokens')}; cost USD: {d.get('cost_usd')}",
    ]
    tests = _tests_event(events)
    if tests is not None:
        lines += ["", "## Test run", "", f"- {test_provenance(tests)}"]
    lines += ["", "## Evidence files", ""]
    lines += [f"- [{name}]({name})" for name in EVIDENCE_FILES]
    return "\n".join(lines) + "\n"


def write_run_md(
    folder: Path, record: dict, events, digest: dict, rules: list[dict] | None = None, fault: list[str] | None = None
) -> None:
    ev_dir = folder / str(record.get("evidence_dir") or f"runs/{record['run_id']}")
    if not ev_dir.is_dir():
        return
    # A lone surrogate (agent text may carry one) is written as its visible \udcff escape.
    text = run_md(record, events, digest, rules, fault).encode("utf-8", "backslashreplace").decode("utf-8")
    path = ev_dir / RUN_MD
    try:
        if path.read_text() == text:
            return  # unchanged: no write, so a re-render of an untouched ledger touches nothing
    except FileNotFoundError:
        pass
    tmp = ev_dir / f".{RUN_MD}.tmp"
    tmp.write_text(text)
    os.replace(tmp, path)


class Pages:
    """Compact per-run evidence for ledger.html, sharing one string pool."""

    def __init__(self):
        self.pool: list[str] = []
        self.index: dict[str, int] = {}
        self.pages: dict[str, list] = {}

    def s(self, text) -> int:
        text = "" if text is None else str(text)
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.pool)
            self.pool.append(text)
        return i

    def add(
        self,
        record: dict,
        events: list[dict] | None,
        patch: str | None,
        rules: list[dict] | None = None,
        fault: list[str] | None = None,
    ) -> None:
        """Page = [exchanges, tool events, diff, test output, rules, report, fault] (pool indices);
        a rule is [field, value, rule, lines, base rule]; fault is the list of
        :func:`claimgrid.ledger.rules.fault_account` lines (empty for a run without a fault)."""
        events = events or []
        ex = []
        for e in sorted(
            (e for e in events if e.get("source") == "gateway" and e.get("kind") == "exchange"),
            key=lambda e: e.get("call_index") or 0,
        ):
            calls = "; ".join(
                f"{c.get('name')}({_cut(c.get('arguments'), CUT['args'])})" for c in e.get("tool_calls") or []
            )
            err = e.get("error")
            ex.append(
                [
                    e.get("call_index"),
                    self.s(e.get("served_model")),
                    self.s(e.get("reported_model")),
                    self.s(e.get("swap")),
                    e.get("status"),
                    self.s(calls),
                    self.s(_cut(e.get("content") or (json.dumps(err) if err else ""), CUT["content"])),
                    [self.s(_cut(t, CUT["result"])) for t in e.get("tool_results") or []],
                ]
            )
        tools = [
            [
                self.s(e.get("tool")),
                self.s(_cut(json.dumps(e.get("args"), sort_keys=True), CUT["args"])),
                1 if e.get("ok") else 0,
                1 if e.get("changed_workspace") else 0,
                self.s(_cut(e.get("result") if e.get("ok") else e.get("error"), CUT["result"])),
            ]
            for e in events
            if e.get("source") == "tools" and e.get("kind") == "tool_call"
        ]
        tests = _tests_event(events)
        # A cached result says so above its output (the output is the earlier run's).
        test_text = (f"[{test_provenance(tests)}]\n" if tests and tests.get("cached") else "") + (
            (tests or {}).get("output_tail") or ""
        )
        report: dict = next((e for e in reversed(events) if e.get("source") == "agent"), {})
        rules = [
            [
                self.s(r["field"]),
                self.s(r["value"] if isinstance(r["value"], str) else json.dumps(r["value"])),
                self.s(r["rule"]),
                r["lines"],
                self.s(r.get("base", r["rule"])),
            ]
            for r in (explain(record, events) if rules is None else rules)
        ]
        self.pages[record["run_id"]] = [
            ex,
            tools,
            self.s(_cut(patch, CUT["diff"])),
            self.s(_cut(test_text, CUT["tests"])),
            rules,
            self.s(_cut(report.get("text"), CUT["report"])),
            [self.s(line) for line in fault or []],
        ]
