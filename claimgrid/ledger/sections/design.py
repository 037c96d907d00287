"""LEDGER.md section 1, the design: what varied, the plan, the configured and observed swap,
the guard, the verifier's cache, the parity groups, and where each task comes from."""

from __future__ import annotations

from collections import Counter

from claimgrid.ledger.firstscreen import plan_text
from claimgrid.ledger.report import Report, heading, table
from claimgrid.ledger.stats import DASH


def design(report: Report) -> str:
    m = report.meta
    specs = report.swap_specs
    idx = (
        "; ".join(
            f"{n}: from call {v.get('unavailable_from_call')} ({v.get('on_unavailable')})" for n, v in specs.items()
        )
        or DASH
    )
    if specs and not report.specs_recorded:
        idx += " (not recorded in meta.json: read from today's conditions/)"
    fired_at = Counter((r["swap_condition"], r["swap_fired_at"]) for r in report.rows if r["swap_fired_at"] is not None)
    guard = m.get("guard")
    reps = m.get("repeats", DASH)
    rows = [
        ["varies", "framework × task × content condition × swap condition × model × repeat"],
        ["plan (from the records)", plan_text(report)],
        ["frameworks", ", ".join(report.frameworks)],
        ["tasks", ", ".join(report.tasks)],
        ["content conditions", ", ".join(report.contents)],
        ["swap conditions", ", ".join(report.swaps)],
        [
            "models",
            ", ".join(
                f"{x} ({'stochastic' if report.stochastic[x] else 'deterministic reference model'})"
                for x in report.models
            ),
        ],
        ["substitute", m.get("substitute") or DASH],
        ["swap call index (configured)", idx],
        [
            "swap call index (observed at the gateway)",
            "; ".join(
                f"{s}: call {i} in {k} runs"
                for (s, i), k in sorted(fired_at.items(), key=lambda x: (str(x[0][0]), x[0][1]))
            )
            or DASH,
        ],
        ["repeats", reps],
        [
            "unit of analysis",
            "one run; frameworks are never pooled into one n, identical replicates are not counted twice",
        ],
        [
            "intervals",
            "none: deterministic: each cell is one outcome"
            if not any(report.stochastic.values())
            else (
                "95% Wilson per cell for stochastic models with repeats ≥ 2; task-clustered where tasks are pooled"
                if isinstance(reps, int) and reps >= 2
                else "none: repeats = 1, no sampling was repeated"
            ),
        ],
        [
            "guard",
            "not recorded"
            if guard is None
            else (
                f"{guard.get('guard')} ({guard.get('bwrap_version') or guard.get('reason') or 'no detail'}; "
                "facts in [reproducibility](#reproducibility))"
            )
            if isinstance(guard, dict)
            else str(guard),
        ],
        *verify_cache_rows(report),
        [
            "parity groups (beyond the model)",
            "1: all runs comparable"
            if len(report.groups) <= 1
            else f"{len(report.groups)}: "
            + "; ".join(f"{g}: {lab}" for g, lab in report.groups)
            + ". The headline is split by group; other sections span groups and say so",
        ],
        ["grid size", report.coverage_line()],
    ]
    notes = "".join(f"\n- {n}" for n in report.L.notes)
    return (
        heading("design", "1. Design")
        + "\n\n"
        + table(["", ""], rows)
        + ("\n" + notes if notes else "")
        + task_table(report)
    )


def verify_cache_rows(report: Report) -> list[list[str]]:
    """The design row on the verifier's test cache (claimgrid.verify.cache); none for a
    ledger written before it existed."""
    setting = report.meta.get("verify_cache")
    statuses = Counter(rec.verify_cache.status if rec.verify_cache else None for rec in report.L.records.values())
    statuses.pop(None, None)
    if setting is None and not statuses:
        return []
    tested = sum(statuses.values())
    text = (
        f"{setting or 'not recorded'}: {statuses.get('hit', 0)} of {tested} test results served by the "
        "test run of an earlier run with an identical final workspace, interpreter, command, guard and "
        "timeout (each names that run; classified as if tested)"
    )
    if setting == "off":
        text = "off (--no-verify-cache): every run's tests were re-run"
    other = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()) if k not in ("hit", "miss"))
    return [["verifier test cache", text + (f"; {other}" if other else "")]]


def task_table(report: Report) -> str:
    """Where each task comes from (``meta.json`` ``task_provenance``): upstream repository,
    commits, license and issues, or written for claimgrid."""
    prov = report.meta.get("task_provenance")
    if not isinstance(prov, dict):
        return ""
    rows = []
    for t in report.tasks:
        p = prov.get(t)
        if not isinstance(p, dict):
            rows.append([t, "written for claimgrid", DASH, DASH, DASH])
            continue
        commits = " → ".join(str(p[k])[:12] for k in ("fixture_commit", "fix_commit") if p.get(k)) or DASH
        rows.append(
            [
                t,
                p.get("repository") or DASH,
                commits,
                p.get("license") or DASH,
                ", ".join(p.get("issues") or []) or DASH,
            ]
        )
    return "\n\n### Tasks\n\n" + table(
        ["task", "upstream repository", "fixture → fix commit", "license", "issues"], rows
    )
