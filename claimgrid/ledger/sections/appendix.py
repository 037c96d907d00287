"""LEDGER.md section 9, the appendix: links, framework versions, runtime settings, parity groups."""

from __future__ import annotations

import json

from claimgrid.ledger.report import Report, heading, table
from claimgrid.ledger.stats import DASH


def appendix(report: Report) -> str:
    retries = "\n".join(
        f"- {fw}: `{json.dumps(v, sort_keys=True)}`" for fw, v in (report.meta.get("retries") or {}).items()
    )
    versions = "\n".join(
        f"- {fw}: " + ", ".join(f"{k} {v}" for k, v in (vs or {}).items())
        for fw, vs in (report.meta.get("frameworks") or {}).items()
    )
    return (
        heading("appendix", "9. Appendix") + "\n\n"
        "- [RUNS.md](RUNS.md): every run, grouped by cell, frameworks side by side.\n"
        "- Every evidence folder `runs/<run id>/` has a `RUN.md`: for each classification field, the rule "
        "that fired and the evidence lines it used.\n"
        "- [ledger.html](ledger.html): filter runs and open one (transcript, tool events, diff, tests, rules).\n\n"
        "### Framework versions\n\n"
        + (versions or DASH)
        + "\n\n### Runtime settings (`versions()` of each adapter)\n\n"
        + (retries or DASH)
        + "\n\n"
        + parity_md(report)
    )


def parity_md(report: Report) -> str:
    """Every parity group with all its facts; facts bound to a framework / task / swap
    condition are listed per value of that dimension."""
    parity = report.parity
    groups = parity.groups()
    out = [
        "### Parity groups\n",
        "Runs are comparable only within a parity group. Facts that belong to one framework (its "
        "versions, retries), one task (its content hash) or one swap condition (its call index) are "
        "listed per framework, task or swap condition when each has a single value; a second value "
        "would split the groups instead.",
    ]
    for g in groups:
        rows = [[k, v] for k, v in g.facts.items()]
        for fact, mapping in parity.bound_facts(g.runs).items():
            rows.append([fact, "; ".join(f"{d}: {v}" for d, v in mapping.items())])
        out.append(f"\n#### {g.id}: {g.label} ({g.runs.height} runs)\n\n" + table(["parity fact", "value"], rows))
    return "\n".join(out)
