"""LEDGER.md in the order a reader needs it: summary, design, headline (swap =
none), framework divergence, swap, detector evaluation, calibration, harness health,
reproducibility, appendix.

Contract: ``Report(ledger).render() -> str``. Every number is computed here from the
loaded ledger (records + evidence digests + meta), and the summary's sentences are built
from the same computed tables, so they cannot disagree with them. Facts per cell, never
a winner: no ranking, no bold cell, no sorting by a rate.

Units of analysis: one run is one outcome. Frameworks are never pooled into one n; when
every framework gave the same classification in every cell, tables show one row for
them and say "identical in all N cells" (the replicates are not counted three times).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict

from claimgrid.ledger.firstscreen import empty_reason, plan_text
from claimgrid.ledger.load import Ledger
from claimgrid.ledger.names import (
    CLAIM_VERDICT,
    CLASSIFICATION_KEYS,
    CONTENT,
    NOT_RECORDED,
    OUTCOME,
    PROCESS,
    SWAP_CONDITION,
    ordered,
)
from claimgrid.ledger.stats import DASH, clustered, format_rate, half_up, p_text

CLAIMED = ("TRUE_SUCCESS", "FALSE_SUCCESS")
REACHED_INJ = ("followed", "followed, then undone", "resisted")
REACHED_NOTE = ("complied", "complied, then undone", "ignored")
# The fields that make up "what happened" in a cell, for comparing frameworks.
IDENTITY = [("swap_outcome" if k == "swap" else k) for k in CLASSIFICATION_KEYS] + ["goal_met", "note_met"]
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


def limit_note(r: dict) -> str:
    """RUNS.md's note of the limits a run hit (none: empty)."""
    from claimgrid.classify.limits import describe

    hits = r.get("limit_hits") or []
    if not hits:
        return ""
    text = "; ".join(describe(h) + (" (harness limit)" if h.get("decided") else "") for h in hits)
    return f" · limit: {text}"


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
            r["treatment"] = self.treatment(r)
            faults = (ledger.records.get(r["run_id"]) or {}).get("faults") or {}
            r["reaction"], r["retried"] = faults.get("reaction"), bool(faults.get("retried"))
            r["fault"], r["fault_call"] = faults.get("fault"), faults.get("fault_call")
            # Limits the run hit other than through an injected fault (claimgrid.classify.limits).
            hits = (ledger.records.get(r["run_id"]) or {}).get("limit_hits") or []
            r["limit_hits"] = [h for h in hits if not h.get("fault")]
            r["limit_decided"] = any(h.get("decided") for h in r["limit_hits"])
        self.identity = IDENTITY
        self.T_FIRED, self.T_NOT_REACHED, self.T_NOOP, self.T_UNKNOWN = (
            TREAT_FIRED,
            TREAT_NOT_REACHED,
            TREAT_NOOP,
            TREAT_UNKNOWN,
        )
        # Frameworks that bring their own tools (facts.own_tools): their tool counts, and the
        # "doing nothing passes" check below, come from the gateway transcript alone.
        self.own_tools_frameworks = sorted(
            {
                r["framework"]
                for r in self.rows
                if (((ledger.records.get(r["run_id"]) or {}).get("facts") or {}).get("own_tools"))
            }
        )
        # Tasks where doing nothing passes: some run of the task used no tool and got PASS.
        self.null_pass_tasks = sorted(
            {r["task"] for r in self.rows if r["outcome"] == "PASS" and r.get("tool_events") == 0}
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
            (k for k, fws in self.by_cell.items() if len({tuple(r[f] for f in IDENTITY) for r in fws.values()}) > 1),
            key=lambda k: tuple("" if v is None else str(v) for v in k),
        )
        self.complete_cells = [k for k, fws in self.by_cell.items() if len(fws) == len(self.frameworks)]
        self.identical = len(self.frameworks) > 1 and not self.divergent
        # Parity groups other than the model (a row of every table): runs that differ in a
        # fact that could change the result (timeout, budget, versions...) are not pooled in
        # the headline; the other sections say when they span more than one group.
        from claimgrid.ledger.parity import Parity

        groups = Parity(ledger.runs, ledger.parity_facts).groups(exclude=("model",)) if self.rows else []
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
        """Framework rows of a table: one collapsed row when frameworks are identical in every
        cell of ``runs`` (the rows of the first framework stand for all), else one per framework."""
        fws = [f for f in self.frameworks if any(r["framework"] == f for r in runs)]
        keys = {tuple(r[k] for k in CELL) for r in runs}
        same = len(fws) > 1 and all(
            len(self.by_cell[k]) == len(self.frameworks) and k not in set(self.divergent) for k in keys
        )
        if same:
            return [
                (
                    f"all {len(fws)} frameworks (identical in all {len(keys)} cells)",
                    [r for r in runs if r["framework"] == fws[0]],
                )
            ]
        return [(f, [r for r in runs if r["framework"] == f]) for f in fws]

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

    # ---- sections ------------------------------------------------------------------

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

    def summary(self) -> str:
        """The first screen (:mod:`claimgrid.ledger.firstscreen`): at most about fifteen lines,
        each computed from the tables below (same functions)."""
        from claimgrid.ledger.firstscreen import first_screen

        body = []
        for line in first_screen(self):
            body.append(line if not line or line.startswith("|") else f"- {line}")
        if len(self.groups) > 1:
            body.append(
                f"- These runs form {len(self.groups)} parity groups beyond the model (they differ in a fact that "
                "could change the result); the headline is split by group ([design](#design))."
            )
        return heading("summary", "0. Summary") + "\n\n" + "\n".join(body)

    def verify_cache_rows(self) -> list[list[str]]:
        """The design row on the verifier's test cache (claimgrid.verify.cache); none for a
        ledger written before it existed."""
        setting = self.meta.get("verify_cache")
        statuses = Counter((rec.get("verify_cache") or {}).get("status") for rec in self.L.records.values())
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

    def design(self) -> str:
        m = self.meta
        specs = self.swap_specs
        idx = (
            "; ".join(
                f"{n}: from call {v.get('unavailable_from_call')} ({v.get('on_unavailable')})" for n, v in specs.items()
            )
            or DASH
        )
        if specs and not self.specs_recorded:
            idx += " (not recorded in meta.json: read from today's conditions/)"
        fired_at = Counter(
            (r["swap_condition"], r["swap_fired_at"]) for r in self.rows if r["swap_fired_at"] is not None
        )
        guard = m.get("guard")
        reps = m.get("repeats", DASH)
        rows = [
            ["varies", "framework × task × content condition × swap condition × model × repeat"],
            ["plan (from the records)", plan_text(self)],
            ["frameworks", ", ".join(self.frameworks)],
            ["tasks", ", ".join(self.tasks)],
            ["content conditions", ", ".join(self.contents)],
            ["swap conditions", ", ".join(self.swaps)],
            [
                "models",
                ", ".join(
                    f"{x} ({'stochastic' if self.stochastic[x] else 'deterministic reference model'})"
                    for x in self.models
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
                if not any(self.stochastic.values())
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
            *self.verify_cache_rows(),
            [
                "parity groups (beyond the model)",
                "1: all runs comparable"
                if len(self.groups) <= 1
                else f"{len(self.groups)}: "
                + "; ".join(f"{g}: {lab}" for g, lab in self.groups)
                + ". The headline is split by group; other sections span groups and say so",
            ],
            ["grid size", self.coverage_line()],
        ]
        notes = "".join(f"\n- {n}" for n in self.L.notes)
        return (
            heading("design", "1. Design")
            + "\n\n"
            + table(["", ""], rows)
            + ("\n" + notes if notes else "")
            + self.task_table()
        )

    def task_table(self) -> str:
        """Where each task comes from (``meta.json`` ``task_provenance``): upstream repository,
        commits, license and issues, or written for claimgrid."""
        prov = self.meta.get("task_provenance")
        if not isinstance(prov, dict):
            return ""
        rows = []
        for t in self.tasks:
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

    def coverage_line(self) -> str:
        planned, present = self.meta.get("grid_size"), len(self.rows)
        if isinstance(planned, int) and planned > 0:
            missing = max(planned - present, 0)
            return f"{present} of {planned} planned runs present" + (
                f"; {missing} not present" if missing else "; complete"
            )
        return f"{present} runs present (planned size unknown)"

    def headline(self) -> str:
        rows = []
        for h in self.headline_rows():
            m = h["model"]
            row = [
                m,
                h["frameworks"],
                self.pooled_rate(h["runs"], lambda r: r["outcome"] == "PASS", lambda r: r["content"] in self.clean, m)
                + self.null_pass_note([r for r in h["runs"] if r["content"] in self.clean]),
                self.pooled_rate(
                    h["runs"],
                    lambda r: r["claim_vs_outcome"] == "FALSE_SUCCESS",
                    lambda r: r["content"] in self.clean and r["claim_vs_outcome"] in CLAIMED,
                    m,
                )
                if any(r["content"] in self.clean and r["claim_vs_outcome"] in CLAIMED for r in h["runs"])
                else empty_reason([r for r in h["runs"] if r["content"] in self.clean], "/".join(self.clean)),
                self.pooled_rate(
                    h["runs"], lambda r: r["outcome"] == "PASS", lambda r: r["content"] in self.injected, m
                )
                if any(r["content"] in self.injected for r in h["runs"])
                else f"{DASH} (not run under {'/'.join(self.injected) or 'injected content'})",
            ]
            row += [h["asr_text"][c] for c in self.injected]
            row += [h["note_text"][c] for c in self.noted]
            rows.append(([h["group"]] if len(self.groups) > 1 else []) + row)
        split = len(self.groups) > 1
        headers = (["parity group"] if split else []) + [
            "model",
            "frameworks",
            "utility, clean",
            "false success among claims, clean",
            "utility under attack",
            *[f"paired attack success, {c}" for c in self.injected],
            *[f"paired note compliance, {c}" for c in self.noted],
        ]
        pic = f"\n\n![headline and swap effect]({self.heatmap_name})" if self.heatmap_name else ""
        excl: Counter[str] = Counter()
        for h in self.headline_rows():
            for v in list(h["asr"].values()) + list(h["note"].values()):
                excl.update({k: v[k] for k in ("not_reached", "unfinished", "clean_met", "unknown")})
        base = [r for r in self.rows if r["swap_condition"] == "none"]
        faulted = [r for r in base if r["fault_call"] is not None or (r["refused"] or 0) > 0]
        served = (
            "the assigned model served every call"
            if not faulted
            else "no swap; the assigned model served every call it answered, and the gateway faulted or refused "
            "a call in "
            f"{len(faulted)} runs ({', '.join(sorted({r['model'] for r in faulted}))})"
        )
        fs_empty = [
            h
            for h in self.headline_rows()
            if not any(r["content"] in self.clean and r["claim_vs_outcome"] in CLAIMED for r in h["runs"])
        ]
        null_pass = (
            f"A task where doing nothing passes ({', '.join(self.null_pass_tasks)}: a run that used no tool "
            "got PASS) counts in utility: a model that did nothing or raised still passes it."
            if self.null_pass_tasks
            else ""
        ) + (
            (" " if self.null_pass_tasks else "") + self.gateway_only_note().strip()
            if self.own_tools_frameworks
            else ""
        )
        return (
            heading("headline", "2. Headline: swap = none") + "\n\n"
            f"Runs under swap condition `none` only: {served}. Utility = verifier "
            "`PASS` among runs; false success = `FALSE_SUCCESS` among runs that claimed success ("
            + (
                f"{len(fs_empty)} rows claimed nothing: `–` with what the framework did instead). "
                if fs_empty
                else "none empty). "
            )
            + null_pass
            + " **Paired**: the attacker goal (owner's note) check holds under the injected (noted) condition, "
            "among runs that reached the instruction and finished (process `ok`) whose matched clean cell "
            "(same framework, task, swap, model, repeat) does not already meet it; left out of n and "
            f"counted in each cell: {excl['not_reached']} not reached, {excl['unfinished']} did not finish, "
            f"{excl['clean_met']} whose clean run already met the check (no effect can be seen), "
            f"{excl['unknown']} without a known check. A model never run under a condition reads "
            "`– (not run under …)`. "
            + (
                "Deterministic: each cell is one outcome; no intervals."
                if not any(self.stochastic.values())
                else "Intervals: Wilson per cell; pooled over tasks, the task is the cluster."
            )
            + (
                f" Split by parity group: {len(self.groups)} groups of runs whose parity facts differ "
                "(appendix) are never pooled here."
                if split
                else ""
            )
            + "\n\n"
            + table(headers, rows)
            + pic
        )

    def divergence(self) -> str:
        out = [heading("divergence", "3. Framework divergence")]
        if len(self.frameworks) < 2:
            out.append("One framework in this ledger: nothing to compare.")
        elif not self.divergent:
            out.append(
                f"Frameworks' classifications ({', '.join(IDENTITY)}) are identical in all "
                f"{len(self.complete_cells)} cells that every framework ran."
            )
        else:
            out.append(
                f"{len(self.divergent)} of {len(self.by_cell)} cells where frameworks' classifications differ "
                "(every one is listed; fields that differ only):"
            )
            rows = []
            for k in self.divergent:
                fws = self.by_cell[k]
                diff = [f for f in IDENTITY if len({str(r[f]) for r in fws.values()}) > 1]
                rows.append(
                    [
                        " · ".join(str(v) for v in k),
                        "; ".join(
                            f"{f}: " + ", ".join(f"{fw} {fws[fw][f]}" for fw in self.frameworks if fw in fws)
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
                self.fw_stats(),
            )
        )
        tests = self.paired_tests_md()
        if tests:
            out.append(tests)
        faults = self.fault_table()
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

    @property
    def pair_tests(self):
        """The paired framework tests on the stochastic models (:mod:`claimgrid.ledger.paired`)."""
        if not hasattr(self, "_pair_tests"):
            from claimgrid.ledger.paired import framework_tests

            stochastic = [m for m in self.models if self.stochastic.get(m)]
            self._pair_tests = framework_tests(self.rows, self.frameworks, stochastic) if stochastic else []
        return self._pair_tests

    def paired_tests_md(self) -> str | None:
        """The paired-tests table: every framework pair × outcome on each stochastic model."""
        from claimgrid.ledger.paired import ALPHA, CORRECTION

        tests = self.pair_tests
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

    def fault_table(self) -> str | None:
        """Fault model x framework: reaction, attempts at the faulted call, claim vs outcome, duplicates."""
        cells: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
        for r in self.rows:
            facts = (self.L.records.get(r["run_id"]) or {}).get("faults")
            if isinstance(facts, dict) and facts.get("fault"):
                cells.setdefault((facts["fault"], r["framework"]), []).append((facts, r))
        if not cells:
            return None
        faults = list(dict.fromkeys(f for f, _ in sorted(cells)))
        rows = []
        for fault in faults:
            row = [fault]
            for fw in self.frameworks:
                got = cells.get((fault, fw))
                if not got:
                    row.append(DASH)
                    continue
                reactions = Counter(f["reaction"] for f, _ in got)
                attempts = sorted({f["attempts_at_fault"] for f, _ in got if f.get("attempts_at_fault")})
                cvo = Counter(r["claim_vs_outcome"] for _, r in got)
                dup = sum(len(f.get("duplicate_side_effects") or []) for f, _ in got)
                row.append(
                    "; ".join(f"{k}: {v}" for k, v in reactions.most_common())
                    + (f" · attempts {'/'.join(map(str, attempts))}" if attempts else "")
                    + " · "
                    + ", ".join(f"{k} {v}" for k, v in cvo.most_common())
                    + (f" · {dup} duplicate side effects" if dup else "")
                )
            rows.append(row)
        return table(["fault model", *self.frameworks], rows)

    def swap(self) -> str:
        out = [heading("swap", "4. Swap")]
        swapped = [r for r in self.rows if r["swap_condition"] != "none"]
        if not swapped:
            return out[0] + "\n\nNo run under a swap condition."
        treats = [TREAT_FIRED, TREAT_NOT_REACHED, TREAT_NOOP, TREAT_UNKNOWN]
        rows = []
        for s in self.swaps:
            for m in self.models:
                for label, runs in self.fw_blocks([r for r in swapped if r["swap_condition"] == s and r["model"] == m]):
                    t = Counter(r["treatment"] for r in runs)
                    rows.append([s, m, label, *[t[x] for x in treats]])
        out.append(
            "**Treatment actually received** (from the gateway log): fired = the gateway swapped or refused "
            "a call; not reached = the run ended before the swap call; no-op = the substitute is the "
            "assigned model. Only `fired` runs count as swapped below.\n\n"
            + table(["swap condition", "model", "frameworks", *treats], rows)
        )
        listed = Counter(
            (r["treatment"], r["swap_condition"], r["model"], r["framework"], r["calls"])
            for r in swapped
            if r["treatment"] in (TREAT_NOT_REACHED, TREAT_NOOP, TREAT_UNKNOWN)
        )
        if listed:
            out.append(
                "Listed, not counted as swapped:\n\n"
                + "\n".join(
                    f"- {tr}: {m} under {s} on {fw}, {k} runs (model calls per run: {DASH if c is None else c})"
                    for (tr, s, m, fw, c), k in sorted(listed.items(), key=lambda x: tuple(str(v) for v in x[0]))
                )
            )
        subs = [
            r
            for r in swapped
            if r["treatment"] == TREAT_FIRED
            and (self.swap_specs.get(r["swap_condition"]) or {}).get("on_unavailable") == "substitute"
        ]
        if subs:
            rows = []
            for s in self.swaps:
                for m in self.models:
                    for label, runs in self.fw_blocks(
                        [r for r in subs if r["swap_condition"] == s and r["model"] == m]
                    ):
                        c = Counter(r["final_writer"] for r in runs if r["claim_vs_outcome"] == "FALSE_SUCCESS")
                        rows.append(
                            [
                                s,
                                m,
                                label,
                                len(runs),
                                ", ".join(f"{w}: {k}" for w, k in sorted(c.items(), key=lambda x: str(x[0]))) or "none",
                            ]
                        )
            out.append(
                "**False success attributed to the model that wrote the final report** (fired substitute "
                "runs; the writer is the gateway's `served_model` of the last answered call):\n\n"
                + table(
                    [
                        "swap condition",
                        "assigned model",
                        "frameworks",
                        "fired runs",
                        "false successes by report writer",
                    ],
                    rows,
                )
            )
        bound = [r for r in swapped if r["treatment"] == TREAT_FIRED and r["swap_outcome"] == "prevented"]
        if bound:
            rows = []
            for m in self.models:
                for label, runs in self.fw_blocks([r for r in bound if r["model"] == m]):
                    if runs:
                        rows.append(
                            [
                                m,
                                label,
                                self.rate(
                                    sum(bool(r["claimed"]) for r in runs),
                                    sum(r["claimed"] is not None for r in runs),
                                    m,
                                ),
                                sum(r["runtime_errors"] or 0 for r in runs),
                            ]
                        )
            out.append(
                "**Claimed success after a refused call** (bound, fired):\n\n"
                + table(["model", "frameworks", "claimed success", "runtime error events"], rows)
            )
            rows = []
            for f in self.frameworks:
                runs = [r for r in bound if r["framework"] == f]
                if runs:
                    n = len(runs)
                    rows.append(
                        [
                            f,
                            n,
                            f"{sum((r['refused'] or 0) > 0 for r in runs)}/{n}",
                            f"{sum((r['runtime_errors'] or 0) > 0 for r in runs)}/{n}",
                            f"{sum(bool(r['swap_mentioned']) for r in runs)}/{n}",
                        ]
                    )
            out.append(
                "**Evidence ladder of a refused call** (bound, fired): the gateway's refusal (503), an error "
                "event in the framework's runtime, the agent's report mentioning it.\n\n"
                + table(["framework", "fired runs", "gateway refusal", "runtime error event", "agent's report"], rows)
            )
        if subs:
            rows = []
            for f in self.frameworks:
                for s in self.swaps:
                    runs = [r for r in subs if r["framework"] == f and r["swap_condition"] == s]
                    if runs:
                        n = len(runs)
                        only_assigned = sum(
                            bool(r["transcript_names_assigned"]) and not r["transcript_names_substitute"] for r in runs
                        )
                        rows.append(
                            [
                                f,
                                s,
                                n,
                                *[
                                    f"{sum(bool(r[c]) for r in runs)}/{n}"
                                    for c in (
                                        "gateway_exposes",
                                        "runtime_names_substitute",
                                        "transcript_names_substitute",
                                    )
                                ],
                                f"{only_assigned}/{n}",
                                f"{sum(bool(r['swap_mentioned']) for r in runs)}/{n}",
                            ]
                        )
            out.append(
                "**Evidence ladder**: which channel exposed the swap, of fired substitute runs (gateway: "
                "`served_model` ≠ assigned; runtime model name: the model name the framework read from the "
                "response; own transcript: the model the framework recorded in its transcript, or its errors; "
                "agent's report: the final text mentions it).\n\n"
                + table(
                    [
                        "framework",
                        "swap condition",
                        "fired runs",
                        "gateway",
                        "runtime model name",
                        "framework's own transcript",
                        "own transcript names only the assigned model",
                        "agent's report",
                    ],
                    rows,
                )
            )
        return "\n\n".join(out)

    def flagged_truth_note(self) -> str:
        """What the reference truth says of the flagged true successes: a flag on a report that
        really misstates the work is the check doing its job, not a false alarm."""
        truth = self.L.inputs.truth
        flagged = [
            (r, truth(r).get("claim_verdict"))
            for r in self.rows
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

    def detector_section(self) -> str:
        out = [
            heading("detector", "5. Detector evaluation"),
            "The claim check (claim verdict) against the verifier's outcome, among runs that claimed success. "
            "Flagged = any verdict other than `consistent`; recall = flagged false successes / false successes; "
            "true successes flagged = flagged true successes / true successes. All swap conditions. "
            + self.flagged_truth_note(),
        ]
        if any(r["role"] == "reviewer" for r in self.rows):
            out.append(
                "On a reviewer task the outcome names mean: `TESTS_FAIL` = the wrong review verdict, "
                "`EMPTY_DIFF` = the files under review were never opened, `MISSING_ARTIFACT` = no verdict."
            )
        for label, runs in self.fw_blocks(self.rows):
            rows = []
            for t in self.tasks + ["all tasks"]:
                sub = runs if t == "all tasks" else [r for r in runs if r["task"] == t]
                d = self.detector(sub)
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
            names = Counter(
                (r["task"], r["claim_verdict"], r["outcome"]) for r in runs if r["claim_vs_outcome"] in CLAIMED
            )
            outs = ordered(OUTCOME, sorted({o for (_, _, o) in names}))
            vrows = [
                [t, v, *[names[(t, v, o)] for o in outs]]
                for t in self.tasks
                for v in ordered(CLAIM_VERDICT, sorted({v for (t2, v, _) in names if t2 == t}))
            ]
            out.append(
                "Which verdict fires on which outcome (claimed runs):\n\n"
                + table(["task", "claim verdict", *outs], vrows)
            )
        return "\n\n".join(out)

    def calibration(self) -> str:
        fn, scope = self.L.inputs.truth, self.L.inputs.truth_scope  # each record's stored truth (.facts)
        out = [
            heading("calibration", "6. Calibration"),
            f"Each classification field against the reference models' true behaviour; truth covers {scope}. "
            "Rows: true value; columns: classified value. A field for which the registry states no truth "
            "is named, not guessed.",
        ]
        norm = lambda v: "–" if v is None else json.dumps(v) if isinstance(v, bool) else str(v)
        col_of = lambda f: "swap_outcome" if f == "swap" else f if f in self.L.runs.columns else f"extra.{f}"
        seen: set[str] = set()
        for label, block in self.fw_blocks(self.rows):
            truths = [(r, fn(r)) for r in block]
            fields = [f for f in dict.fromkeys(k for _, t in truths for k in t) if col_of(f) in self.L.runs.columns]
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
        keys = [("swap" if k == "swap" else k) for k in CLASSIFICATION_KEYS] + list(self.L.extra_classification_keys)
        missing = [k for k in keys if k not in seen]
        if missing:
            out.append("No truth in the reference-model registry for: " + ", ".join(f"`{k}`" for k in missing) + ".")
        return "\n\n".join(out)

    def health(self) -> str:
        designed = Counter(
            r["framework"] for r in self.rows if r["swap_outcome"] == "prevented" and r["process"] != "ok"
        )
        other = Counter(
            (r["framework"], r["process"])
            for r in self.rows
            if not (r["swap_outcome"] == "prevented" and r["process"] != "ok")
        )
        procs = ordered(PROCESS, sorted({p for (_, p) in other}))
        rows = [[f, designed[f], *[other[(f, p)] for p in procs]] for f in self.frameworks]
        planned = self.meta.get("grid_size")
        missing = planned - len(self.rows) if isinstance(planned, int) else None
        spend = self.meta.get("spend") or {}
        providers = spend.get("providers") or {}
        provider_md = (
            (
                "\n\nReal-model providers (the gateway retries a provider's transient errors, invisible to "
                "the agent; a run whose provider failed past the retries is `UNKNOWN`, reason `provider`):\n\n"
                + table(
                    ["model", "calls", "retries", "failures"],
                    [
                        [m, v.get("calls", DASH), v.get("retries", DASH), v.get("failures", DASH)]
                        for m, v in providers.items()
                    ],
                )
            )
            if providers
            else ""
        )
        unpriced = spend.get("unpriced_models") or []
        price_md = (
            f"\n\nNo price known for: {', '.join(f'`{m}`' for m in unpriced)} (tokens counted; cost covers "
            "only priced calls)."
            if unpriced and any("/" in m for m in unpriced)
            else ""
        )
        return (
            heading("health", "7. Harness health") + "\n\n"
            "Designed refusals: runs under `bound` whose refused call ended the framework's run (an "
            "adapter error or crash that is the framework correctly raising), kept apart from every other "
            "process outcome.\n\n"
            + table(["framework", "designed refusal (bound)", *procs], rows)
            + f"\n\nHarness errors (planned runs without a record): {DASH if missing is None else missing}."
            + provider_md
            + price_md
        )

    def reproducibility(self) -> str:
        m = self.meta
        h = m.get("hashes") or {}
        fmt = lambda d: "; ".join(f"{k}: {v}" for k, v in (d or {}).items()) or "not recorded"
        rows = [
            ["command", f"`{m['command']}`" if m.get("command") else DASH],
            ["claimgrid commit", m.get("claimgrid_commit") or DASH],
            ["started / finished", f"{m.get('started') or DASH} / {m.get('finished') or 'not finished'}"],
            ["Python / platform", f"{m.get('python') or DASH} / {m.get('platform') or DASH}"],
            ["lock hashes", fmt(h.get("lock"))],
            ["task hashes", fmt(h.get("task"))],
            ["content condition hashes", fmt(h.get("content_condition"))],
            ["swap condition hashes", fmt(h.get("swap_condition"))],
            ["reference-model policy hash", h.get("policies") or "not recorded"],
            [
                "swap call index",
                "; ".join(f"{k}: {v.get('unavailable_from_call')}" for k, v in self.swap_specs.items()) or DASH,
            ],
            ["guard", json.dumps(m.get("guard"), sort_keys=True) if m.get("guard") is not None else "not recorded"],
            [
                "timeout / isolation / jobs",
                f"{m.get('timeout_s', DASH)} s / {m.get('isolation') or DASH} / {m.get('jobs', DASH)}",
            ],
        ]
        return (
            heading("reproducibility", "8. Reproducibility")
            + "\n\n"
            + table(["", ""], rows)
            + "\n\n`uv run grid.py reclassify <this folder>` re-derives every classification from the stored "
            "evidence and re-renders this ledger, RUNS.md, ledger.html, heatmap.svg and every RUN.md; "
            "with unchanged evidence and code the output is byte-identical."
        )

    def parity_md(self) -> str:
        """Every parity group with all its facts; facts bound to a framework / task / swap
        condition are listed per value of that dimension."""
        from claimgrid.ledger.parity import Parity

        parity = Parity(self.L.runs, self.L.parity_facts)
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

    def appendix(self) -> str:
        retries = "\n".join(
            f"- {fw}: `{json.dumps(v, sort_keys=True)}`" for fw, v in (self.meta.get("retries") or {}).items()
        )
        versions = "\n".join(
            f"- {fw}: " + ", ".join(f"{k} {v}" for k, v in (vs or {}).items())
            for fw, vs in (self.meta.get("frameworks") or {}).items()
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
            + self.parity_md()
        )

    def venv_failures_note(self) -> str:
        """The frameworks whose venv failed to build in the last invocation (meta.json
        ``venv_failures``): their runs were not started, so the tables hold none of them."""
        failed = [f for f in self.meta.get("venv_failures") or [] if isinstance(f, dict)]
        if not failed:
            return ""
        items = "; ".join(
            f"`{cell(f.get('framework'))}`, {f.get('runs_not_started', DASH)} runs not started: {cell(f.get('error'))}"
            for f in failed
        )
        return (
            f"\n\n**Framework venvs that failed to build** ({items}). `grid.py run --resume` runs them once it builds."
        )

    def render(self) -> str:
        title = f"# claimgrid ledger {self.meta.get('grid_id', self.L.folder.name)}" + self.venv_failures_note()
        if not self.rows:
            return (
                "\n\n".join([title, self.design(), "_No run has completed yet: there is nothing to aggregate._"]) + "\n"
            )
        stop = self.meta.get("stopped_at_budget")
        if isinstance(stop, dict):
            title += (
                f"\n\n**Stopped at budget** ({stop.get('limit', 'limit')}): spent "
                f"${stop.get('cost_usd', 0):.4f} and {stop.get('tokens', 0):,} tokens; "
                f"{stop.get('runs_done', DASH)} runs done, {stop.get('runs_not_started', DASH)} not started"
                + ("" if stop.get("cost_complete", True) else " (cost covers priced calls only)")
                + ". `grid.py run --resume` with a higher limit continues."
            )
        parts = [
            title,
            self.summary(),
            self.design(),
            self.headline(),
            self.divergence(),
            self.swap(),
            self.detector_section(),
            self.calibration(),
            self.health(),
            self.reproducibility(),
            self.appendix(),
        ]
        return "\n\n".join(parts) + "\n"

    # ---- RUNS.md -------------------------------------------------------------------

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

    def runs_md(self) -> str:
        """RUNS.md: one row per cell, frameworks side by side (claim vs outcome · verdict · run link)."""
        fws = self.frameworks
        rows = []
        orders = (self.tasks, self.contents, self.swaps, self.models)
        pos = lambda k: (*[o.index(v) if v in o else len(o) for o, v in zip(orders, k)], -1 if k[4] is None else k[4])
        several = len(fws) > 1
        for k in sorted(self.by_cell, key=pos):
            cellr = self.by_cell[k]
            any_r = next(iter(cellr.values()))
            same = len({tuple(r[f] for f in IDENTITY) for r in cellr.values()}) == 1
            row = [*[DASH if v is None else v for v in k], any_r["treatment"]]
            if several:
                row.append("same" if same and len(cellr) == len(fws) else "**differ**" if not same else "incomplete")
            for f in fws:
                r = cellr.get(f)
                row.append(
                    DASH
                    if r is None
                    else f"[{r['claim_vs_outcome']} · {r['claim_verdict']} · {r['outcome']} · inj {r['injection']} · "
                    f"{r['process']}{limit_note(r)}]({r['evidence_dir']}/RUN.md)"
                )
            rows.append(row)
        head = (
            f"# Runs of {self.meta.get('grid_id', self.L.folder.name)}\n\n{len(self.rows)} runs in {len(self.by_cell)} cells. "
            "One row per cell; each framework's column shows claim vs outcome · claim verdict · outcome · "
            "injection · process and links to that run's RUN.md (why it got each value). "
            "Back to [LEDGER.md](LEDGER.md).\n\n" + self.gateway_only_note()
        )
        return (
            head
            + table(
                [
                    "task",
                    "content",
                    "swap",
                    "model",
                    "repeat",
                    "swap treatment",
                    *(["frameworks"] if several else []),
                    *fws,
                ],
                rows,
            )
            + "\n"
        )
