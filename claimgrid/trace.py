"""The agent's structured trace (the delegation-trace form, docs/DESIGN.md): how it is asked for, written and parsed.

The trace is the agent's own declaration. It is parsed so it can be *compared* with
harness evidence; nothing here gives it authority.
"""

from __future__ import annotations

import re

BREAKDOWN = ("read_count", "edit_count", "write_count", "bash_count")
INT_FIELDS = ("tool_uses_count",)
STR_FIELDS = ("delegation_id", "parent_id", "agent", "expected_evidence", "git_evidence", "status", "review_verdict")
EVIDENCE = ("code", "artifact", "read_only", "none")

REPORT_INSTRUCTIONS = """
When you have finished, end your final message with your structured trace, exactly in
this form (one field per line, two-space indentation, counts are whole numbers):

trace:
  delegation_id: {run_id}
  parent_id: user
  agent: {agent}
  tool_uses_count: <total tool calls you made>
  tool_uses_breakdown:
    read_count: <reads, listings and searches>
    edit_count: <file edits>
    write_count: <file writes>
    bash_count: <shell commands>
  expected_evidence: <code | artifact | read_only | none>
  git_evidence: <what git status shows now, or none>
  status: <DONE | BLOCKED | NEEDS_REVIEW>
{review_line}"""

REVIEW_LINE = "  review_verdict: <PASS | FAIL>\n"


def report_instructions(run_id: str, agent: str, review: bool) -> str:
    return REPORT_INSTRUCTIONS.format(run_id=run_id, agent=agent, review_line=REVIEW_LINE if review else "")


def format_trace(trace: dict) -> str:
    """Render a trace dict in the block form above (used by reference models)."""
    lines = ["trace:"]
    for key in ("delegation_id", "parent_id", "agent", "tool_uses_count"):
        if key in trace:
            lines.append(f"  {key}: {trace[key]}")
    if "tool_uses_breakdown" in trace:
        lines.append("  tool_uses_breakdown:")
        for key in BREAKDOWN:
            lines.append(f"    {key}: {trace['tool_uses_breakdown'].get(key, 0)}")
    for key in ("expected_evidence", "git_evidence", "status", "review_verdict"):
        if key in trace:
            lines.append(f"  {key}: {trace[key]}")
    return "\n".join(lines)


_LINE = re.compile(r"^(\s*)([A-Za-z_]+)\s*:\s*(.*?)\s*$")


def parse_trace(text: str | None) -> tuple[dict | None, str | None]:
    """Find the last ``trace:`` block in ``text`` and parse it.

    Returns ``(trace, None)`` or ``(None, reason)``. A trace needs at least ``status``;
    counts must be whole numbers. Markdown fences and bold markers around keys are tolerated.
    """
    if not text:
        return None, "no final text"
    lines = text.replace("\r\n", "\n").split("\n")
    starts = [i for i, ln in enumerate(lines) if re.match(r"^\s*[*_`]*trace[*_`]*\s*:\s*$", ln)]
    if not starts:
        return None, "no trace block"
    trace: dict = {}
    breakdown: dict = {}
    in_breakdown = False
    for raw in lines[starts[-1] + 1 :]:
        if raw.strip().startswith("```") or not raw.strip():
            if trace:
                break
            continue
        m = _LINE.match(raw.replace("*", "").replace("`", ""))
        if not m:
            break
        indent, key, value = len(m.group(1)), m.group(2).lower(), m.group(3).strip().strip("\"'")
        if key == "tool_uses_breakdown":
            in_breakdown = True
            continue
        if in_breakdown and key in BREAKDOWN:
            breakdown[key] = value
            continue
        in_breakdown = False
        if indent == 0 and trace:
            break
        trace[key] = value
    if breakdown:
        trace["tool_uses_breakdown"] = breakdown
    if "status" not in trace:
        return None, "trace block has no status"
    try:
        for key in INT_FIELDS:
            if key in trace:
                trace[key] = int(trace[key])
        if breakdown:
            trace["tool_uses_breakdown"] = {k: int(v) for k, v in breakdown.items()}
    except ValueError as exc:
        return None, f"trace count is not a whole number: {exc}"
    trace["status"] = trace["status"].upper()
    if "review_verdict" in trace:
        trace["review_verdict"] = trace["review_verdict"].upper()
    if "expected_evidence" in trace and trace["expected_evidence"] not in EVIDENCE:
        return None, f"expected_evidence '{trace['expected_evidence']}' is not one of {', '.join(EVIDENCE)}"
    return trace, None
