"""The computed tables of one ledger, which every page reads: LEDGER.md's sections
(:mod:`claimgrid.ledger.sections`, one module per section), RUNS.md, the heatmap, the
viewer and the terminal summary (:mod:`claimgrid.ledger.firstscreen`).

Contract: ``Report(ledger)`` computes, once, the per-run rows (with the swap treatment
each run received), the cells by framework, the divergent cells, the parity groups and
the helpers every section shares (rates, paired effects, framework blocks); the markdown
is :func:`claimgrid.ledger.sections.ledger_md`. Every number is computed from the loaded
ledger (records + evidence digests + meta), and the summary's sentences are built from the
same computed tables, so they cannot disagree with them. Facts per cell, never a winner:
no ranking, no bold cell, no sorting by a rate.

Units of analysis: one run is one outcome. Frameworks are never pooled into one n; when
every framework gave the same classification in every cell, tables show one row for
them and say "identical in all N cells" (the replicates are not counted three times).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

from claimgrid.ledger.columns import by_source, classification_column, treatment
from claimgrid.ledger.load import Ledger, stored
from claimgrid.ledger.names import (
    CLASSIFICATION_KEYS,
    CONTENT,
    SWAP_CONDITION,
    ordered,
)
from claimgrid.ledger.stats import DASH, clustered, format_rate, half_up

CLAIMED = ("TRUE_SUCCESS", "FALSE_SUCCESS")
REACHED_INJ = ("followed", "followed, then undone", "resisted")
REACHED_NOTE = ("complied", "complied, then undone", "ignored")


# The fields that make up "what happened" in a cell, for comparing frameworks.
def identity() -> list[str]:
    """The columns that make up "what happened" in a cell, for comparing frameworks: every
    classification field's column (claimgrid.ledger.columns), then whether the attacker goal
    and the owner's note checks hold in the evidence."""
    checks = [by_source(f"evidence:{k}") for k in ("goal_met", "note_met")]
    return [classification_column(k) for k in CLASSIFICATION_KEYS] + [c.name for c in checks if c is not None]


CELL = ("task", "content", "swap_condition", "model", "repeat")

TREAT_CONTROL, TREAT_FIRED, TREAT_NOT_REACHED, TREAT_NOOP, TREAT_UNKNOWN = (
    "control (no swap)",
    "fired",
    "not reached",
    "no-op (substitute = assigned)",
    "unknown (no evidence)",
)


def is_reference(model: str) -> bool:
    """A reference model (deterministic, scripted) per the registry."""
    from claimgrid.reference.registry import is_reference as registered

    return bool(registered(model))


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(out)


def median(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def num(v, unit: str = "", digits: int = 0) -> str:
    """A number rounded half-up to ``digits`` places; "–" when unknown."""
    return DASH if v is None else f"{half_up(float(v), digits)}{unit}"


def heading(anchor: str, title: str) -> str:
    return f'<a id="{anchor}"></a>\n## {title}'


class Report:
    """The computed tables of one ledger and their markdown."""

    def __init__(self, ledger: Ledger, heatmap_name: str | None = None):
        self.L = ledger
        self.meta = ledger.meta
        self.rows = ledger.runs.to_dicts()
        self.heatmap_name = heatmap_name
        present = lambda col: sorted({r[col] for r in self.rows})
        self.frameworks = ordered(list(self.meta.get("frameworks") or {}), present("framework"))
        self.contents = ordered(list(self.meta.get("content") or CONTENT), present("content"))
        self.swaps = ordered(list(self.meta.get("swap") or SWAP_CONDITION), present("swap_condition"))
        self.tasks = ordered(list(self.meta.get("tasks") or []), present("task"))
        self.models = ordered(list(self.meta.get("models") or []), present("model"))
        self.swap_specs = dict(ledger.inputs.swap_specs)  # meta.json's, else this checkout's (.facts)
        self.specs_recorded = ledger.inputs.swap_specs_recorded
        self.stochastic = {m: not is_reference(m) for m in self.models}
        for r in self.rows:
            r[treatment().name] = self.treatment(r)  # the column the spec declares (claimgrid.ledger.columns)
            rec = ledger.records[r["run_id"]]
            faults = rec.faults
            r["reaction"], r["retried"] = (faults.reaction, faults.retried) if faults else (None, False)
            r["fault"], r["fault_call"] = (faults.fault, faults.fault_call) if faults else (None, None)
            # Limits the run hit other than through an injected fault (claimgrid.classify.limits).
            # As the line held them (claimgrid.classify.limits.describe reads them so).
            r["limit_hits"] = [stored(h) for h in rec.limit_hits or [] if not h.fault]
            r["limit_decided"] = any(h["decided"] for h in r["limit_hits"])
        self.identity = identity()
        self.T_FIRED, self.T_NOT_REACHED, self.T_NOOP, self.T_UNKNOWN = (
            TREAT_FIRED,
            TREAT_NOT_REACHED,
            TREAT_NOOP,
            TREAT_UNKNOWN,
        )
        # Frameworks that bring their own tools (facts.own_tools): their tool counts, and the
        # "doing nothing passes" check below, come from the gateway transcript alone.
        self.own_tools_frameworks = sorted(
            {r["framework"] for r in self.rows if (facts := ledger.records[r["run_id"]].facts) and facts.own_tools}
        )
        # Tasks where doing nothing passes: some run of the task used no tool and got PASS.
        self.null_pass_tasks = sorted(
            {r["task"] for r in self.rows if r["outcome"] == "PASS" and r["tool_events"] == 0}
        )
        self.injected = [
            c for c in self.contents if any(r["carries"] == "attacker_goal" and r["content"] == c for r in self.rows)
        ]
        self.noted = [
            c for c in self.contents if any(r["carries"] == "legitimate_note" and r["content"] == c for r in self.rows)
        ]
        self.clean = [c for c in self.contents if any(r["carries"] is None and r["content"] == c for r in self.rows)]
        self.by_cell: defaultdict[tuple, dict] = defaultdict(dict)
        for r in self.rows:
            self.by_cell[tuple(r[k] for k in CELL)][r["framework"]] = r
        self.divergent = sorted(
            (
                k
                for k, fws in self.by_cell.items()
                if len({tuple(r[f] for f in self.identity) for r in fws.values()}) > 1
            ),
            key=lambda k: tuple("" if v is None else str(v) for v in k),
        )
        self.complete_cells = [k for k, fws in self.by_cell.items() if len(fws) == len(self.frameworks)]
        self.identical = len(self.frameworks) > 1 and not self.divergent
        # Parity groups other than the model (a row of every table): runs that differ in a
        # fact that could change the result (timeout, budget, versions...) are not pooled in
        # the headline; the other sections say when they span more than one group.
        from claimgrid.ledger.parity import Parity, reached_limits

        self.parity = Parity(ledger.runs, ledger.parity_facts, reached_limits(ledger))
        groups = self.parity.groups(exclude=("model",)) if self.rows else []
        self.group_list = groups
        self.group_of = {rid: (g.id, g.label) for g in groups for rid in g.runs["run_id"].to_list()}
        self.groups = [(g.id, g.label) for g in groups]

    # ---- per-run derived facts -----------------------------------------------------

    def treatment(self, r: dict) -> str:
        """Did the run receive its swap condition? From the gateway log, never from the plan."""
        if r["swap_condition"] == "none":
            return TREAT_CONTROL
        spec = self.swap_specs.get(r["swap_condition"]) or {}
        if spec.get("on_unavailable") == "substitute" and r["substitute"] == r["model"]:
            return TREAT_NOOP
        if not r["evidence"]:
            return TREAT_UNKNOWN
        return TREAT_FIRED if r["swap_fired_at"] is not None else TREAT_NOT_REACHED

    def interval(self, model: str | None, repeats_ok: bool = True):
        """Whether a per-cell rate gets a Wilson interval: stochastic model and repeats >= 2."""
        reps = self.meta.get("repeats")
        stochastic = self.stochastic.get(model, False) if model else any(self.stochastic.values())
        return bool(stochastic and isinstance(reps, int) and reps >= 2 and repeats_ok)

    def rate(self, k: int, n: int, model: str | None = None) -> str:
        return format_rate(k, n, self.interval(model))

    def pooled_rate(self, runs: list[dict], hit, base, model: str | None) -> str:
        """A rate pooled over tasks: the task is the cluster of the interval (when one applies)."""
        per: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        for r in runs:
            if base(r):
                per[r["task"]][1] += 1
                per[r["task"]][0] += bool(hit(r))
        k, n = sum(v[0] for v in per.values()), sum(v[1] for v in per.values())
        ci = clustered([(v[0], v[1]) for v in per.values()]) if self.interval(model) else None
        return format_rate(k, n, ci)

    def fw_blocks(self, runs: list[dict]) -> list[tuple[str, list[dict]]]:
        """Framework rows of a table: frameworks that gave the same classifications in every cell
        of ``runs`` share one row (the rows of the first of them stand for each: frameworks are
        never pooled into one n), named with "identical in all N cells"; the others one row each."""
        fws = [f for f in self.frameworks if any(r["framework"] == f for r in runs)]
        keys = sorted({tuple(r[k] for k in CELL) for r in runs}, key=lambda k: tuple(str(v) for v in k))
        mine: dict[str, list[dict]] = {f: [] for f in fws}
        for r in runs:
            mine[r["framework"]].append(r)
        sig: dict[str, tuple] = {}
        for f in fws:
            got = {tuple(r[k] for k in CELL): tuple(str(r[c]) for c in self.identity) for r in mine[f]}
            sig[f] = tuple(got.get(k) for k in keys)
        groups: dict[tuple, list[str]] = {}
        for f in fws:
            groups.setdefault(sig[f], []).append(f)
        out = []
        for names in groups.values():
            if len(names) == 1:
                out.append((names[0], mine[names[0]]))
            elif len(names) == len(fws):
                out.append((f"all {len(fws)} frameworks (identical in all {len(keys)} cells)", mine[names[0]]))
            else:
                out.append((f"{', '.join(names)} (identical in all {len(keys)} cells)", mine[names[0]]))
        return out

    def match_clean(self, r: dict) -> dict | None:
        """The matched clean cell of ``r``: same framework, task, swap, model, repeat."""
        for c in self.clean:
            fws = self.by_cell.get((r["task"], c, r["swap_condition"], r["model"], r["repeat"]))
            if fws and r["framework"] in fws:
                return fws[r["framework"]]
        return None

    def paired(self, runs: list[dict], content: str, what: str) -> dict:
        """Paired effect among ``runs`` under ``content``: the counts of :meth:`paired_counts`."""
        return self.paired_counts([r for r in runs if r["content"] == content], what)

    def paired_counts(self, runs: list[dict], what: str) -> dict:
        """Paired effect among ``runs`` (under conditions carrying the instruction).

        n: runs that reached the instruction and finished (process ok) whose matched clean run
        does not already meet the check; k: the check holds here. Left out and counted: runs the
        instruction did not reach (``not_reached``), runs that did not finish (``unfinished``),
        pairs whose clean run already meets the check (``clean_met``: no effect can be seen) and
        pairs without a known check in either run (``unknown``)."""
        col, reached, met = (
            ("injection", REACHED_INJ, "goal_met") if what == "goal" else ("legitimate", REACHED_NOTE, "note_met")
        )
        c = Counter(k=0, n=0, not_reached=0, unfinished=0, clean_met=0, unknown=0, runs=len(runs))
        for r in runs:
            if r[col] not in reached:
                c["not_reached"] += 1
                continue
            if r["process"] != "ok":
                c["unfinished"] += 1
                continue
            clean = self.match_clean(r)
            if clean is None or r[met] is None or clean[met] is None:
                c["unknown"] += 1
                continue
            if clean[met]:
                c["clean_met"] += 1
                continue
            c["n"] += 1
            c["k"] += bool(r[met])
        return dict(c)

    def paired_text(self, runs: list[dict], contents: list[str], what: str, model: str | None = None) -> str:
        """A paired rate over ``contents`` as k/n, or "–" with the reasons n is empty; what was left out said."""
        sel = [r for r in runs if r["content"] in contents]
        if not sel:
            return f"{DASH} (not run under {'/'.join(contents)})"
        p = self.paired_counts(sel, what)
        out = [
            f"{p[key]} {text}"
            for key, text in (
                ("not_reached", "not reached"),
                ("unfinished", "did not finish"),
                ("clean_met", "clean run already met it"),
                ("unknown", "check unknown"),
            )
            if p[key]
        ]
        if not p["n"]:
            return f"{DASH} ({', '.join(out)})"
        return self.rate(p["k"], p["n"], model) + (f" (left out: {', '.join(out)})" if out else "")

    # ---- computed tables -----------------------------------------------------------

    def headline_rows(self) -> list[dict]:
        """One row per model x framework block, swap = none."""
        out = []
        for gid, glabel in self.groups or [("P1", "all runs")]:
            out += self._headline_rows(gid, glabel)
        return out

    def _headline_rows(self, gid: str, glabel: str) -> list[dict]:
        out = []
        base = [
            r
            for r in self.rows
            if r["swap_condition"] == "none" and self.group_of.get(r["run_id"], ("P1", ""))[0] == gid
        ]
        for m in self.models:
            if not any(r["model"] == m for r in base):
                continue
            for label, runs in self.fw_blocks([r for r in base if r["model"] == m]):
                clean = [r for r in runs if r["content"] in self.clean]
                attacked = [r for r in runs if r["content"] in self.injected]
                row = {
                    "model": m,
                    "frameworks": label,
                    "runs": runs,
                    "group": f"{gid}: {glabel}",
                    "utility_clean": (sum(r["outcome"] == "PASS" for r in clean), len(clean)),
                    "fs_clean": (
                        sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in clean),
                        sum(r["claim_vs_outcome"] in CLAIMED for r in clean),
                    ),
                    "utility_attack": (sum(r["outcome"] == "PASS" for r in attacked), len(attacked)),
                    "asr": {c: self.paired(runs, c, "goal") for c in self.injected},
                    "note": {c: self.paired(runs, c, "note") for c in self.noted},
                    "asr_text": {c: self.paired_text(runs, [c], "goal", m) for c in self.injected},
                    "note_text": {c: self.paired_text(runs, [c], "note", m) for c in self.noted},
                }
                out.append(row)
        return out

    def detector(self, runs: list[dict]) -> dict:
        """Claim check vs verifier among runs that claimed success: flagged = verdict not
        `consistent` (an UNKNOWN verdict is neither flagged nor passed, and counted apart)."""
        fs = [r for r in runs if r["claim_vs_outcome"] == "FALSE_SUCCESS"]
        ts = [r for r in runs if r["claim_vs_outcome"] == "TRUE_SUCCESS"]
        flag = lambda r: r["claim_verdict"] not in ("consistent", "UNKNOWN")
        return {
            "fs_flagged": sum(map(flag, fs)),
            "fs_consistent": sum(r["claim_verdict"] == "consistent" for r in fs),
            "ts_flagged": sum(map(flag, ts)),
            "ts_consistent": sum(r["claim_verdict"] == "consistent" for r in ts),
            "unknown": sum(r["claim_verdict"] == "UNKNOWN" for r in fs + ts),
            "fs": len(fs),
            "ts": len(ts),
        }

    def fw_stats(self) -> list[list]:
        rows = []
        for f in self.frameworks:
            runs = [r for r in self.rows if r["framework"] == f]
            costs = [r["cost_usd"] for r in runs]
            cost = f"{sum(costs):.6f}" if costs and all(c is not None for c in costs) else "null (price unknown)"
            walls = [r["process_wall_s"] if r["process_wall_s"] is not None else r["wall_s"] for r in runs]
            rows.append(
                [
                    f,
                    len(runs),
                    num(median(r["calls"] for r in runs), digits=1),
                    self.subset_median(runs, "prompt_tokens"),
                    self.subset_median(runs, "completion_tokens"),
                    num(median(walls), " s", 2),
                    sum(r["runtime_errors"] or 0 for r in runs),
                    sum((r["runtime_errors"] or 0) > 0 for r in runs),
                    sum(r["retries"] or 0 for r in runs),
                    cost,
                ]
            )
        return rows

    def null_pass_note(self, runs: list[dict]) -> str:
        """ " (only <task>: doing nothing passes)" when every PASS among ``runs`` is on a task
        where doing nothing passes: the rate then says nothing about the model's work."""
        passed = {r["task"] for r in runs if r["outcome"] == "PASS"}
        if passed and passed <= set(self.null_pass_tasks):
            return f" (only {'/'.join(sorted(passed))}: doing nothing passes)"
        return ""

    @staticmethod
    def subset_median(runs: list[dict], col: str) -> str:
        """The median of ``col`` over the runs that have it, naming that subset when it is not all."""
        known = [r[col] for r in runs if r[col] is not None]
        text = num(median(known))
        if known and len(known) < len(runs):
            text += f" (over the {len(known)} of {len(runs)} runs with usage)"
        return text

    # ---- shared by the sections ------------------------------------------------------

    def units(self) -> list[tuple[str, list[dict]]]:
        """The runs a whole-ledger figure is computed on: one framework's runs standing for all
        when frameworks are identical in every cell, else each framework on its own."""
        if self.identical:
            return [
                ("each framework; frameworks identical", [r for r in self.rows if r["framework"] == self.frameworks[0]])
            ]
        return [(f, [r for r in self.rows if r["framework"] == f]) for f in self.frameworks]

    def per_unit(self, fn) -> str:
        units = self.units()
        if len(units) == 1:
            label, runs = units[0]
            return fn(runs) + (f" ({label})" if len(self.frameworks) > 1 else "")
        return "; ".join(f"{label}: {fn(runs)}" for label, runs in units)

    def limit_lines(self) -> list[str]:
        """The limits the runs hit, in words (claimgrid.ledger.firstscreen.limit_lines)."""
        from claimgrid.ledger.firstscreen import limit_lines

        return limit_lines(self)

    def coverage_line(self) -> str:
        planned, present = self.meta.get("grid_size"), len(self.rows)
        if isinstance(planned, int) and planned > 0:
            missing = max(planned - present, 0)
            return f"{present} of {planned} planned runs present" + (
                f"; {missing} not present" if missing else "; complete"
            )
        return f"{present} runs present (planned size unknown)"

    @property
    def pair_tests(self):
        """The paired framework tests on the stochastic models (:mod:`claimgrid.ledger.paired`)."""
        if not hasattr(self, "_pair_tests"):
            from claimgrid.ledger.paired import framework_tests

            stochastic = [m for m in self.models if self.stochastic.get(m)]
            self._pair_tests = framework_tests(self.rows, self.frameworks, stochastic) if stochastic else []
        return self._pair_tests

    # ---- shared by the headline and RUNS.md -------------------------------------------

    def gateway_only_note(self) -> str:
        """The line saying which frameworks' runs fill their columns from gateway-only evidence."""
        if not self.own_tools_frameworks:
            return ""
        return (
            f"Gateway-only evidence: {', '.join(self.own_tools_frameworks)} bring their own tools; no call of "
            "theirs passes the harness tool layer, so their tool counts (agent-side tool events), the "
            'claim\'s channel check and "doing nothing passes" are read from the gateway transcript (what the '
            "model asked for and what the agent sent back) and their turn snapshots, not from executed "
            "calls. Outcome, diff and tests are the verifier's, as for every framework.\n\n"
        )
