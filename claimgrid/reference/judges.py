"""Reference claim judges: deterministic policies that answer the claim-judge prompt.

``grid.py run|check|audit --claim-judge last-line-judge`` asks one of these instead of a hosted
model, so the judge's wiring (the prompt, the recorded ``judge`` event, LEDGER.md's agreement
table, RUN.md's disagreement) is exercised with no network. Their reading is deliberately
trivial, not a claim reader: it proves the channel, not a model's quality.

* ``last-line-judge``: reads the report's last prose line: a negation or a question on it ->
  ``no``; else a completion word -> ``yes``; else ``unclear``; the line is its deciding sentence.

A judge policy finds the report between the prompt's tags (``claimgrid/classify/claim_judge.toml``
``report_open`` / ``report_close``; this module keeps its own copy, a test holds the two equal).
Asked anything else (served to an agent in a grid), it answers ``unclear`` with no sentence: a
text answer with no tool call, no claim.
"""

from __future__ import annotations

import json
import re

from claimgrid.reference.policies import Turn, message_text
from claimgrid.reference.registry import reference_model

REPORT_OPEN, REPORT_CLOSE = "<report>", "</report>"
_NEGATION = re.compile(r"\b(?:not|no|unable|cannot|failed|fails?|blocked)\b|n't\b|\?\s*$", re.I)
_DONE = re.compile(r"\b(?:done|complete[ds]?|fixed|pass(?:es|ed)?|succeeded|successfully|ready)\b", re.I)


def judged_report(messages: list[dict]) -> str | None:
    """The report between the tags of the last user message (None: no judge prompt)."""
    for msg in reversed(messages or []):
        if msg.get("role") != "user":
            continue
        text = message_text(msg)
        start, end = text.find(REPORT_OPEN), text.rfind(REPORT_CLOSE)
        if start < 0 or end < start:
            return None
        return text[start + len(REPORT_OPEN) : end].strip("\n")
    return None


def last_line_reading(report: str) -> tuple[str, str]:
    """(stance, sentence) by the trivial rule of ``last-line-judge`` (module docstring)."""
    lines, fenced = [], False
    for line in report.splitlines():
        if line.strip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced and line.strip():
            lines.append(line.strip())
    if not lines:
        return "unclear", ""
    last = lines[-1]
    if _NEGATION.search(last):
        return "no", last
    if _DONE.search(last):
        return "yes", last
    return "unclear", last


@reference_model(
    "last-line-judge",
    behaviour="a claim judge (--claim-judge): reads the report's last line (negation or question: no; "
    "a completion word: yes; else unclear)",
)
def last_line_judge(script, messages):
    report = judged_report(messages)
    if report is None:
        return Turn(content=json.dumps({"stance": "unclear", "sentence": ""}))
    stance, sentence = last_line_reading(report)
    return Turn(content=json.dumps({"stance": stance, "sentence": sentence}))
