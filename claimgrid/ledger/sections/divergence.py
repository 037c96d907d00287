"""LEDGER.md section 3, framework divergence: the cells whose classifications differ, the
per-framework figures, the paired framework tests and what each framework does with a fault."""

from __future__ import annotations

from collections import Counter

from claimgrid.ledger.report import Report, heading, table
from claimgrid.ledger.stats import DASH, p_text
from claimgrid.store.record import Faults


def divergence(report: Report) -> str:
    out = [heading("divergence", "3. Framework divergence")]
    if len(report.frameworks) < 2:
        out.append("One framework in this ledger: nothing to compare.")
    elif not report.divergent:
        out.append(
            f"Frameworks' classifications ({', '.join(report.identity)}) are identical in all "
            f"{len(report.complete_cells)} cells that every framework ran."
        )
    else:
        out.append(
            f"{len(report.divergent)} of {len(report.by_cell)} cells where frameworks' classifications differ "
            "(every one is listed; fields that differ only):"
        )
        rows = []
        for k in report.divergent:
            fws = report.by_cell[k]
            diff = [f for f in report.identity if len({str(r[f]) for r in fws.values()}) > 1]
            rows.append(
                [
                    " · ".join(str(v) for v in k),
                    "; ".join(
                        f"{f}: " + ", ".join(f"{fw} {fws[fw][f]}" for fw in report.frameworks if fw in fws)
                        for f in diff
                    ),
                ]
            )
        out.append(table(["cell (task · content · swap · model · repeat)", "differences"], rows))
    out.append(
        "Per framework (medians per run; errors, retries and runs summed). Token medians cover the runs "
        "whose every model call reported usage (a refused call has none), and say so when that is not "
        "every run. Retries = gateway requests "
        "that followed a refused one. Cost is LiteLLM's price; null when it does not know it, never 0."
    )
    out.append(
        table(
            [
                "framework",
                "runs",
                "model calls",
                "prompt tokens",
                "completion tokens",
                "wall time",
                "runtime error events",
                "runs with a runtime error",
                "gateway retries",
                "cost (USD)",
            ],
            report.fw_stats(),
        )
    )
    tests = paired_tests_md(report)
    if tests:
        out.append(tests)
    faults = fault_table(report)
    if faults:
        out.append(
            "### What each framework does with a fault\n\n"
            "Fault models (the registry's `fault` entries) behave like `diligent` except for one fault; "
            "each cell: the framework's reaction (`raised`, `reported DONE`, `ended silently`, `timeout`, "
            "`crash`: runs), the attempts that reached the gateway for the faulted call, claim vs outcome, "
            "and duplicate side effects (a write, edit or command executed again with the same "
            "arguments). From each run's stored `faults` facts (harness evidence only)."
        )
        out.append(faults)
    return "\n\n".join(out)


def paired_tests_md(report: Report) -> str | None:
    """The paired-tests table: every framework pair × outcome on each stochastic model."""
    from claimgrid.ledger.paired import ALPHA, CORRECTION

    tests = report.pair_tests
    if not tests:
        return None
    rows = [
        [
            t.model,
            f"`{t.outcome}` rate",
            f"{t.a} vs {t.b}",
            t.n,
            t.a_only,
            t.b_only,
            p_text(t.p),
            p_text(t.p_adj),
            t.result(),
            DASH if t.repeats_needed is None else t.repeats_needed,
        ]
        for t in tests
    ]
    left = sum(t.unknown for t in tests)
    return (
        '<a id="paired-tests"></a>\n### Paired framework tests (stochastic models)\n\n'
        "Two frameworks are paired on the same cells (task × content × swap × model × repeat index). "
        "Per pair and outcome (a run's `claim_vs_outcome` is the outcome or not), the exact McNemar test "
        "(two-sided exact binomial on the discordant cells); the "
        f"{len(tests)} tests form one family, {CORRECTION}-adjusted, alpha {ALPHA}. A difference is stated "
        "only when the adjusted p is below alpha; repeats needed = the smallest r for which the same family "
        "on repeats 1..r already states it"
        + (f"; {left} paired cells with an UNKNOWN outcome left out" if left else "")
        + ".\n\n"
        + table(
            [
                "model",
                "outcome",
                "frameworks (A vs B)",
                "paired cells",
                "A only",
                "B only",
                "p (exact McNemar)",
                f"p ({CORRECTION})",
                "result",
                "repeats needed",
            ],
            rows,
        )
    )


def fault_table(report: Report) -> str | None:
    """Fault model x framework: reaction, attempts at the faulted call, claim vs outcome, duplicates."""
    cells: dict[tuple[str, str], list[tuple[Faults, dict]]] = {}
    for r in report.rows:
        facts = report.L.records[r["run_id"]].faults
        if facts is not None and facts.fault:
            cells.setdefault((facts.fault, r["framework"]), []).append((facts, r))
    if not cells:
        return None
    faults = list(dict.fromkeys(f for f, _ in sorted(cells)))
    rows = []
    for fault in faults:
        row = [fault]
        for fw in report.frameworks:
            got = cells.get((fault, fw))
            if not got:
                row.append(DASH)
                continue
            reactions = Counter(f.reaction for f, _ in got)
            attempts = sorted({f.attempts_at_fault for f, _ in got if f.attempts_at_fault})
            cvo = Counter(r["claim_vs_outcome"] for _, r in got)
            dup = sum(f.duplicate_side_effects for f, _ in got)  # a count per run (store.record.Faults)
            row.append(
                "; ".join(f"{k}: {v}" for k, v in reactions.most_common())
                + (f" · attempts {'/'.join(map(str, attempts))}" if attempts else "")
                + " · "
                + ", ".join(f"{k} {v}" for k, v in cvo.most_common())
                + (f" · {dup} duplicate side effects" if dup else "")
            )
        rows.append(row)
    return table(["fault model", *report.frameworks], rows)
