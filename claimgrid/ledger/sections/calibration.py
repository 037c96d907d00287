"""LEDGER.md section 6, calibration: each classification field against the reference truth."""

from __future__ import annotations

import json
from collections import Counter

from claimgrid.ledger.columns import classification_column
from claimgrid.ledger.names import CLAIM_VERDICT, CLASSIFICATION_KEYS, NOT_RECORDED, ordered
from claimgrid.ledger.report import Report, heading, table
from claimgrid.ledger.stats import format_rate


def calibration(report: Report) -> str:
    fn, scope = report.L.inputs.truth, report.L.inputs.truth_scope  # each record's stored truth (.facts)
    out = [
        heading("calibration", "6. Calibration"),
        f"Each classification field against the reference models' true behaviour; truth covers {scope}. "
        "Rows: true value; columns: classified value. A field for which the registry states no truth "
        "is named, not guessed.",
    ]
    norm = lambda v: "–" if v is None else json.dumps(v) if isinstance(v, bool) else str(v)
    col_of = classification_column  # the spec's column of each field (claimgrid.ledger.columns)
    seen: set[str] = set()
    for label, block in report.fw_blocks(report.rows):
        truths = [(r, fn(r)) for r in block]
        fields = [f for f in dict.fromkeys(k for _, t in truths for k in t) if col_of(f) in report.L.runs.columns]
        seen.update(fields)
        if not fields:
            out.append(f"**{label}**: no run with a stated truth.")
            continue
        rows = []
        for f in fields:
            pairs = [(norm(t[f]), norm(r[col_of(f)])) for r, t in truths if f in t]
            # A record without the field (an older classifier) is not a disagreement: counted apart.
            absent = sum(b in (NOT_RECORDED, "–") for _, b in pairs)
            pairs = [(a, b) for a, b in pairs if b not in (NOT_RECORDED, "–")]
            agree = sum(a == b for a, b in pairs)
            off = Counter((a, b) for a, b in pairs if a != b)
            rows.append(
                [
                    f,
                    format_rate(agree, len(pairs), False),
                    "; ".join(f"true {a} → classified {b}: {k}" for (a, b), k in sorted(off.items())) or "none",
                    absent,
                ]
            )
        out.append(
            f"**{label}**\n\n"
            + table(
                [
                    "field",
                    "agrees with the truth",
                    "disagreements (true → classified: runs)",
                    "not recorded (reclassify to fill)",
                ],
                rows,
            )
        )
        cv = [(norm(t["claim_verdict"]), r["claim_verdict"]) for r, t in truths if "claim_verdict" in t]
        if cv:
            cols = ordered(CLAIM_VERDICT, sorted({b for _, b in cv}))
            rws = ordered(CLAIM_VERDICT, sorted({a for a, _ in cv}))
            c = Counter(cv)
            out.append(
                "Confusion matrix, `claim_verdict`:\n\n"
                + table(["true \\ classified", *cols], [[a, *[c[(a, b)] for b in cols]] for a in rws])
            )
        dis = Counter(
            (r["model"], r["task"], norm(t["claim_verdict"]), r["claim_verdict"])
            for r, t in truths
            if "claim_verdict" in t and norm(t["claim_verdict"]) != r["claim_verdict"]
        )
        if dis:
            out.append(
                "Claim-verdict disagreements: "
                + "; ".join(
                    f"{m} on {t}: true “{e}”, classified “{v}” ({k})" for (m, t, e, v), k in sorted(dis.items())
                )
                + "."
            )
    keys = [("swap" if k == "swap" else k) for k in CLASSIFICATION_KEYS] + list(report.L.extra_classification_keys)
    missing = [k for k in keys if k not in seen]
    if missing:
        out.append("No truth in the reference-model registry for: " + ", ".join(f"`{k}`" for k in missing) + ".")
    return "\n\n".join(out)
