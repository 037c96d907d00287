"""Per-run pages: ``runs/<run id>/RUN.md``, the explanation of one run beside its evidence.

Contract:

- :func:`run_md` ``(record, events, patch, digest) -> str``: the RUN.md of one run: its
  cell, for each classification field the rule that fired and the evidence lines it used
  (linked into ``events.jsonl``), and links to the evidence files. RUN.md is a derived
  file (``store.DERIVED_FILES``): it is not in the sha256 manifest and is rewritten on
  every render.
- ledger.html's compact per-run evidence is :class:`claimgrid.ledger.html.ViewerPages`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from claimgrid.anybytes import markdown_text
from claimgrid.classify.judge import agrees, reader_label
from claimgrid.ledger.load import evidence_dir
from claimgrid.ledger.rules import explain
from claimgrid.store.inert import write_file
from claimgrid.store.lines import EVENTS_NAME
from claimgrid.store.record import RunRecord
from claimgrid.vocab import JUDGE_SOURCE, JUDGE_STANCE

RUN_MD = "RUN.md"
EVIDENCE_FILES = (
    EVENTS_NAME,
    "gateway.jsonl",
    "transcript.json",
    "trace.json",
    "diff.patch",
    "test_output.txt",
    "control.json",
    "stderr.txt",
    "manifest.json",
)


def _tests_event(events: list[dict] | None) -> dict | None:
    return next((e for e in events or [] if e.get("source") == "verifier" and e.get("kind") == "tests"), None)


def judge_lines(record: RunRecord, events: list[dict] | None) -> list[str]:
    """RUN.md's claim judge part: the judge's reading of the report beside the reader's, which
    decides (``[]`` when no judge read this run: ``--claim-judge``, claimgrid.classify.judge)."""
    found = [e for e in events or [] if e.get("source") == JUDGE_SOURCE and e.get("kind") == "claim_reading"]
    if not found:
        return []
    j, c = found[-1], record.classification
    stance = c.claim_stance if c else None
    reader = f"{stance} ({reader_label(stance)}) by {c.claim_rule if c else None!r}" + (
        f", deciding sentence {c.claim_phrase!r}" if c and c.claim_phrase else ""
    )
    if j.get("stance") in JUDGE_STANCE:
        said = f"{j['stance']}, deciding sentence {j.get('sentence')!r}"
        verdict = "they agree" if agrees(stance, j["stance"]) else "**they differ**: the reader's stance stands"
    else:
        said, verdict = f"no reading ({j.get('error')})", "nothing to compare"
    return [
        "",
        "## Claim judge (a second reader, no authority)",
        "",
        f"- judge: `{j.get('model')}`, prompt {j.get('prompt_version')}",
        f"- the judge read: {said}",
        f"- the reader (decides): {reader}",
        f"- {verdict}",
    ]


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


def read_stderr(folder: Path, record: RunRecord) -> str | None:
    """The run's stored stderr.txt (None when absent)."""
    path = folder / evidence_dir(record) / "stderr.txt"
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def run_md(
    record: RunRecord,
    events: list[dict] | None,
    digest: dict,
    rules: list[dict] | None = None,
    fault: list[str] | None = None,
) -> str:
    rid = record.run_id
    coords = " · ".join(
        f"{k} {getattr(record, k)}" for k in ("framework", "task", "content", "swap", "model", "repeat")
    )
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
    lines += judge_lines(record, events)
    tests = _tests_event(events)
    if tests is not None:
        lines += ["", "## Test run", "", f"- {test_provenance(tests)}"]
    lines += ["", "## Evidence files", ""]
    lines += [f"- [{name}]({name})" for name in EVIDENCE_FILES]
    return "\n".join(lines) + "\n"


def write_run_md(
    folder: Path,
    record: RunRecord,
    events,
    digest: dict,
    rules: list[dict] | None = None,
    fault: list[str] | None = None,
) -> None:
    ev_dir = folder / evidence_dir(record)
    if not ev_dir.is_dir():
        return
    # lone surrogates shown as \udXXX text, control and bidi characters as escapes, HTML as text
    text = markdown_text(run_md(record, events, digest, rules, fault))
    path = ev_dir / RUN_MD
    try:
        if not path.is_symlink() and path.read_text(encoding="utf-8", errors="replace") == text:
            return  # unchanged: no write, so a re-render of an untouched ledger touches nothing
    except FileNotFoundError:
        pass
    write_file(path, text)  # through a new temporary: a symlink planted at RUN.md is refused
