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
        "- Every evidence folder `runs/RUN_ID/` has a `RUN.md`: for each classification field, the rule "
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
    """The parity facts every group shares, once; then one row per group with only the facts that
    set it apart (its label). Facts bound to a framework / task / swap condition are listed per
    value of that dimension."""
    parity = report.parity
    groups = parity.groups()
    out = [
        "### Parity groups\n",
        "Runs are comparable only within a parity group. Facts that belong to one framework (its "
        "versions, retries), one task (its content hash) or one swap condition (its call index) are "
        "listed per framework, task or swap condition when each has a single value; a second value "
        "would split the groups instead. Paths of the machine that ran them and a measured deadline no "
        "run reached are provenance (meta.json, the records), not parity.",
    ]
    if not groups:
        return "\n".join(out)
    shared = {k: v for k, v in groups[0].facts.items() if all(g.facts.get(k) == v for g in groups)}
    rows = [[k, v] for k, v in shared.items()]
    for fact, mapping in parity.bound_facts(parity.runs).items():
        rows.append([fact, "; ".join(f"{d}: {v}" for d, v in mapping.items())])
    out.append(
        f"\n{'Shared by all ' + str(len(groups)) + ' groups' if len(groups) > 1 else 'The facts'}:\n\n"
        + table(["parity fact", "value"], rows)
    )
    if len(groups) > 1:
        out.append(
            "\n" + table(["group", "what sets it apart", "runs"], [[g.id, g.label, g.runs.height] for g in groups])
        )
    return "\n".join(out)
