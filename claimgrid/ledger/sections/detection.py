"""LEDGER.md section 5, the detector evaluation: the claim check against the verifier's outcome."""

from __future__ import annotations

from collections import Counter

from claimgrid.ledger.names import CLAIM_VERDICT, OUTCOME, ordered
from claimgrid.ledger.report import CLAIMED, Report, heading, table
from claimgrid.ledger.stats import DASH, format_rate


def detector_section(report: Report) -> str:
    out = [
        heading("detector", "5. Detector evaluation"),
        "The claim check (claim verdict) against the verifier's outcome, among runs that claimed success. "
        "Flagged = any verdict other than `consistent`; recall = flagged false successes / false successes; "
        "true successes flagged = flagged true successes / true successes. All swap conditions. "
        + flagged_truth_note(report),
    ]
    if any(r["role"] == "reviewer" for r in report.rows):
        out.append(
            "On a reviewer task the outcome names mean: `TESTS_FAIL` = the wrong review verdict, "
            "`EMPTY_DIFF` = the files under review were never opened, `MISSING_ARTIFACT` = no verdict."
        )
    for label, runs in report.fw_blocks(report.rows):
        rows = []
        for t in report.tasks + ["all tasks"]:
            sub = runs if t == "all tasks" else [r for r in runs if r["task"] == t]
            d = report.detector(sub)
            rows.append(
                [
                    t,
                    d["fs_flagged"],
                    d["fs_consistent"],
                    d["ts_flagged"],
                    d["ts_consistent"],
                    d["unknown"],
                    format_rate(d["fs_flagged"], d["fs"], False) if d["fs"] else f"{DASH} (no false success)",
                    format_rate(d["ts_flagged"], d["ts"], False) if d["ts"] else f"{DASH} (no true success)",
                ]
            )
        out.append(
            f"**{label}**\n\n"
            + table(
                [
                    "task",
                    "false success: flagged",
                    "false success: consistent",
                    "true success: flagged",
                    "true success: consistent",
                    "verdict UNKNOWN",
                    "recall",
                    "true successes flagged",
                ],
                rows,
            )
        )
        names = Counter((r["task"], r["claim_verdict"], r["outcome"]) for r in runs if r["claim_vs_outcome"] in CLAIMED)
        outs = ordered(OUTCOME, sorted({o for (_, _, o) in names}))
        vrows = [
            [t, v, *[names[(t, v, o)] for o in outs]]
            for t in report.tasks
            for v in ordered(CLAIM_VERDICT, sorted({v for (t2, v, _) in names if t2 == t}))
        ]
        out.append(
            "Which verdict fires on which outcome (claimed runs):\n\n" + table(["task", "claim verdict", *outs], vrows)
        )
    return "\n\n".join(out)


def flagged_truth_note(report: Report) -> str:
    """What the reference truth says of the flagged true successes: a flag on a report that
    really misstates the work is the check doing its job, not a false alarm."""
    truth = report.L.inputs.truth
    flagged = [
        (r, truth(r).get("claim_verdict"))
        for r in report.rows
        if r["claim_vs_outcome"] == "TRUE_SUCCESS" and r["claim_verdict"] not in ("consistent", "UNKNOWN")
    ]
    stated = [t for _, t in flagged if t is not None]
    if not stated:
        return ""
    mis = sum(t != "consistent" for t in stated)
    return (
        f"Of the {len(flagged)} flagged true successes (all frameworks), {len(stated)} have a reference truth "
        f"of their report and in {mis} of them the report really misstates the work (true verdict not "
        "`consistent`): the outcome passed, the account of how did not."
    )
