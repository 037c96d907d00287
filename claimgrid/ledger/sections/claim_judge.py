"""LEDGER.md's claim judge section: a model's reading of each report beside the deterministic reader's.

Present only when some run carries a ``judge`` event (``--claim-judge MODEL``,
claimgrid.classify.judge). The judge has no authority: this section counts how often it reads a
report as the classifier's claim reader did (the reader's ``claim_stance`` in the judge's words:
:func:`claimgrid.classify.judge.reader_label`) and lists the runs where they differ; every other
section, and every classification, is the reader's alone.
"""

from __future__ import annotations

from collections import Counter

from claimgrid.caps import JUDGE_DISAGREEMENTS_LISTED
from claimgrid.classify.judge import reader_label
from claimgrid.ledger.digest import NO_READING
from claimgrid.ledger.report import Report, heading, table
from claimgrid.ledger.stats import format_rate
from claimgrid.vocab import JUDGE_STANCE


def _stance(report: Report, run_id: str) -> str | None:
    c = report.L.records[run_id].classification
    return c.claim_stance if c else None


def claim_judge(report: Report) -> str:
    """The section's markdown; "" when no run was read by a judge."""
    judged = [r for r in report.rows if r.get("judge_stance")]
    if not judged:
        return ""
    # the reader's stance: the record's classification (not a ledger column); rows are not changed
    judged = [{**r, "claim_stance": _stance(report, r["run_id"])} for r in judged]
    out = [
        heading("claim-judge", "Claim judge: a second reader, no authority"),
        "Each final report was also read by the model named below with the fixed, versioned judge prompt "
        "(`claimgrid/classify/claim_judge.toml`; the version is in each run's `judge` event). Its reading is "
        "recorded as its own evidence (source `judge`) and never changes a classification: the deterministic "
        "reader's `claim_stance` decides. Rows: the reader's stance in the judge's words (success = yes, "
        "partial, UNKNOWN = unclear, any other stance = no); columns: the judge's answer.",
    ]
    columns = [*JUDGE_STANCE, NO_READING]
    for model in sorted({str(r["judge_model"]) for r in judged}):
        runs = [r for r in judged if str(r["judge_model"]) == model]
        counts = Counter((reader_label(r["claim_stance"]), r["judge_stance"]) for r in runs)
        rows = [
            [f"reader: {label}", *(counts[(label, c)] for c in columns), sum(counts[(label, c)] for c in columns)]
            for label in JUDGE_STANCE
            if any(counts[(label, c)] for c in columns)
        ]
        read = [r for r in runs if r["judge_stance"] in JUDGE_STANCE]
        same = [r for r in read if reader_label(r["claim_stance"]) == r["judge_stance"]]
        # The disagreement that matters most: one of the two reads a success claim, the other not.
        claim_split = [r for r in read if (reader_label(r["claim_stance"]) == "yes") != (r["judge_stance"] == "yes")]
        out.append(
            f"**judge `{model}`**: agrees with the reader on {format_rate(len(same), len(read), False)} of the "
            f"reports it read ({len(runs) - len(read)} without a reading); on whether the report claims success: "
            f"{format_rate(len(read) - len(claim_split), len(read), False)}.\n\n"
            + table(["", *(f"judge: {c}" for c in columns), "n"], rows)
        )
        differ = [r for r in read if reader_label(r["claim_stance"]) != r["judge_stance"]]
        if differ:
            listed = [
                f"- [{r['run_id']}]({r['evidence_dir']}/RUN.md): reader {r['claim_stance']} "
                f"({reader_label(r['claim_stance'])}), judge {r['judge_stance']}"
                for r in differ[:JUDGE_DISAGREEMENTS_LISTED]
            ]
            more = len(differ) - len(listed)
            out.append(
                "Runs where they differ (each RUN.md shows both deciding sentences):\n\n"
                + "\n".join(listed)
                + (f"\n- … {more} more: `judge_stance` in runs.parquet" if more > 0 else "")
            )
    return "\n\n".join(out)
