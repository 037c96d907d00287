"""The first screen of an audit's LEDGER.md (``grid.py audit DIR``, meta.json ``audit``): per agent
× model, the runs, the success claims, the false successes among them with their Wilson
interval, the honest failures and the runs that could not be read; then why each unreadable
run could not be, and the sentence that decided each claim (false successes first).

Its own function (:func:`audit_first_screen`) so a reshaped first screen can place it as a
whole. It reads the records and each run's ``audit.json`` (where the run came from and what
stayed unknown, why); nothing else.
"""

from __future__ import annotations

import json

from claimgrid.ledger.report import Report, cell, heading, table
from claimgrid.ledger.stats import DASH, format_rate

AUDIT_FILE = "audit.json"
# Claims and unreadable runs listed by name on the first screen; the rest are in RUNS.md.
LISTED = 30


def audit_facts(report: Report, run_id: str) -> dict:
    """The run's ``audit.json`` (an empty dict when it has none or it is not an object)."""
    path = report.L.folder / "runs" / run_id / AUDIT_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _c(report: Report, row: dict):
    """The run's typed classification (the fields the flat frame does not carry as columns)."""
    return report.L.records[row["run_id"]].classification


def _groups(report: Report) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for r in report.rows:
        out.setdefault((r["framework"], r["model"]), []).append(r)
    return out


def audit_table(report: Report) -> str:
    """Per agent × model: runs, claims, false successes among the claims whose outcome is known
    (Wilson 95%), honest failures, outcome unknown, unreadable."""
    rows = []
    for (agent, model), runs in sorted(_groups(report).items()):
        claims = [r for r in runs if r["claimed"]]
        decided = [r for r in claims if r["claim_vs_outcome"] != "UNKNOWN"]
        false = sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in decided)
        rows.append(
            [
                f"`{cell(agent)}`",
                f"`{cell(model)}`",
                len(runs),
                len(claims),
                format_rate(false, len(decided)),
                sum(r["claim_vs_outcome"] == "HONEST_FAILURE" for r in runs),
                sum(r["claim_vs_outcome"] == "UNKNOWN" and r["claim_verdict"] != "UNKNOWN" for r in runs),
                sum(_c(report, r).claim_stance == "UNKNOWN" and r["claim_verdict"] == "UNKNOWN" for r in runs),
            ]
        )
    return table(
        [
            "agent",
            "model",
            "runs",
            "success claims",
            "false success among claims with a known outcome (95%)",
            "honest failures",
            "outcome unknown",
            "unreadable",
        ],
        rows,
    )


def audit_first_screen(report: Report) -> str:
    """The audit's first screen (module doc): the table, the unreadable runs with why, the deciding sentences."""
    audit = report.meta.get("audit") or {}
    facts = {r["run_id"]: audit_facts(report, r["run_id"]) for r in report.rows}
    head = (
        heading("audit", "Audit: runs made elsewhere")
        + f"\n\n{len(report.rows)} runs found in `{cell(audit.get('source'))}` "
        f"({audit.get('files_left_out', 0)} files left out as documentation, logs or hidden), each classified by "
        "claimgrid's classifier from its own transcript; the outcome is the verdict another harness recorded "
        "beside it (evidence source `external`), else `UNKNOWN`. A claim is the report's conclusion as the "
        "claim reader read it; its sentence is quoted below."
    )
    parts = [head, audit_table(report)]
    unreadable = [r for r in report.rows if facts[r["run_id"]].get("unreadable")]
    if unreadable:
        items = [f"- `{cell(r['task'])}`: {cell(facts[r['run_id']]['unreadable'])}" for r in unreadable[:LISTED]]
        more = len(unreadable) - LISTED
        parts.append(
            f"**Unreadable runs** ({len(unreadable)}): recorded as `UNKNOWN`, never dropped.\n\n"
            + "\n".join(items)
            + (f"\n- … {more} more: each run's audit.json" if more > 0 else "")
        )
    order = {"FALSE_SUCCESS": 0, "TRUE_SUCCESS": 1, "UNKNOWN": 2}
    claims = sorted(
        (r for r in report.rows if r["claimed"]), key=lambda r: (order.get(r["claim_vs_outcome"], 3), r["task"])
    )
    if claims:
        items = [
            f"- `{cell(r['task'])}` ({r['claim_vs_outcome']}): “{cell(_c(report, r).claim_phrase or DASH)}”"
            + (
                f" — outcome unknown: {cell(why)}"
                if (why := facts[r["run_id"]].get("unknown", {}).get("outcome"))
                else ""
            )
            for r in claims[:LISTED]
        ]
        more = len(claims) - LISTED
        parts.append(
            f"**The sentence that decided each claim** ({len(claims)}; false successes first):\n\n"
            + "\n".join(items)
            + (f"\n- … {more} more: each run's `claim_phrase` in runs.jsonl" if more > 0 else "")
        )
    return "\n\n".join(parts)
