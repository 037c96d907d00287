"""LEDGER.md section 8, reproducibility: the facts a re-run needs."""

from __future__ import annotations

import json

from claimgrid.ledger.report import Report, heading, table
from claimgrid.ledger.stats import DASH
from claimgrid.machinepaths import redact


def resumed_line(m: dict) -> str:
    """Each resume's time and the commit its runs ran on ("not recorded" before meta kept it)."""
    times, commits = m.get("resumed") or [], m.get("resumed_commits") or []
    if not times:
        return "never"
    return "; ".join(
        f"{t} on {commits[i] or 'an unknown commit'}" if i < len(commits) else f"{t} (commit not recorded)"
        for i, t in enumerate(times)
    )


def reproducibility(report: Report) -> str:
    m = report.meta
    h = m.get("hashes") or {}
    fmt = lambda d: "; ".join(f"{k}: {v}" for k, v in (d or {}).items()) or "not recorded"
    rows = [
        # an older ledger's command may name its publisher's folders (claimgrid.machinepaths)
        ["command", f"`{redact(str(m['command']))}`" if m.get("command") else DASH],
        ["claimgrid commit", m.get("claimgrid_commit") or DASH],
        ["resumed", resumed_line(m)],
        ["started / finished", f"{m.get('started') or DASH} / {m.get('finished') or 'not finished'}"],
        ["Python / platform", f"{m.get('python') or DASH} / {m.get('platform') or DASH}"],
        ["lock hashes", fmt(h.get("lock"))],
        ["task hashes", fmt(h.get("task"))],
        ["content condition hashes", fmt(h.get("content_condition"))],
        ["swap condition hashes", fmt(h.get("swap_condition"))],
        ["reference-model policy hash", h.get("policies") or "not recorded"],
        [
            "swap call index",
            "; ".join(f"{k}: {v.get('unavailable_from_call')}" for k, v in report.swap_specs.items()) or DASH,
        ],
        ["guard", redact(json.dumps(m.get("guard"), sort_keys=True)) if m.get("guard") is not None else "not recorded"],
        [
            "timeout / isolation / jobs",
            f"{m.get('timeout_s', DASH)} s / {m.get('isolation') or DASH} / {m.get('jobs', DASH)}",
        ],
    ]
    return (
        heading("reproducibility", "8. Reproducibility")
        + "\n\n"
        + table(["", ""], rows)
        + "\n\n`uv run grid.py reclassify DIR` (DIR: this folder) re-derives every classification from the stored "
        "evidence and re-renders this ledger, RUNS.md, ledger.html, heatmap.svg and every RUN.md; "
        "with unchanged evidence and code the output is byte-identical."
    )
