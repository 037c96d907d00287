"""Rendering LEDGER.md and RUNS.md from a loaded ledger.

Facts per cell, never a verdict about who is best: no ranking, no bold cell, no sorting
by a rate. Every rate is ``k/n · r% (lo–hi%)`` with a 95% Wilson interval; an empty
denominator is "–". Tables that would pool runs with different parity facts are split
per parity group (see :mod:`.parity`), and say so.
"""

from __future__ import annotations

import polars as pl

from . import aggregate as agg
from .load import Ledger
from .names import (CLAIM_VERDICT, CLASSIFICATION_KEYS, CONTENT, OUTCOME,
                    PROCESS, SWAP_CONDITION, ordered)
from .parity import Group, Parity
from .stats import DASH, format_rate

SEED_001_NOTE = (
    "seed 001's admitted false positive: a builder task with nothing to change makes a "
    "truthful agent look like a read-only impostor, because the builder role expects a diff")


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(cell(h) for h in headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(out)


class Renderer:
    """Holds the ledger, its parity rules and the display order of every dimension."""

    def __init__(self, ledger: Ledger, heatmap_name: str | None):
        self.L = ledger
        self.runs = ledger.runs
        self.meta = ledger.meta
        self.parity = Parity(self.runs, ledger.parity_facts)
        self.heatmap_name = heatmap_name
        present = lambda col: self.runs[col].unique().to_list() if not self.runs.is_empty() else []
        self.frameworks = ordered(list(self.meta.get("frameworks") or {}), present("framework"))
        self.contents = ordered(list(self.meta.get("content") or CONTENT), present("content"))
        self.swaps = ordered(list(self.meta.get("swap") or SWAP_CONDITION), present("swap_condition"))
        self.tasks = ordered(list(self.meta.get("tasks") or []), present("task"))
        self.models = ordered(list(self.meta.get("models") or []), present("model"))

    # ---- building blocks -------------------------------------------------------------

    def per_group(self, render, exclude: tuple[str, ...] = (), runs: pl.DataFrame | None = None) -> str:
        """Render ``render(group_runs)`` once per parity group, with headings when split."""
        groups = self.parity.groups(runs, exclude)
        if not groups:
            return "_No runs._"
        if len(groups) == 1:
            return render(groups[0].runs)
        parts = [f"_{self.parity.split_note(groups)}_"]
        for g in groups:
            parts.append(f"**{self.group_title(g, exclude)}** ({g.runs.height} runs)\n\n{render(g.runs)}")
        return "\n\n".join(parts)

    def group_title(self, g: Group, exclude) -> str:
        return f"{g.id}: {g.label}" if not exclude else g.label

    @staticmethod
    def present(runs: pl.DataFrame, col: str, order: list[str]) -> list[str]:
        """``order`` restricted to values that occur in ``runs`` (a group shows only its own rows)."""
        have = set(runs[col].unique().to_list())
        return [v for v in order if v in have]

    @staticmethod
    def lookup(df: pl.DataFrame, keys: list[str]) -> dict:
        return {tuple(r[k] for k in keys): r for r in df.iter_rows(named=True)}

    # ---- sections --------------------------------------------------------------------

    def how_to_read(self) -> str:
        return (
            "## How to read this ledger\n\n"
            "Each run is one cell of framework × task × content condition × swap condition × "
            "model × repeat. Its classification is computed only from evidence the harness "
            "observed itself (tool layer, gateway, verifier, process); the agent's own report is "
            "recorded and compared, never trusted, and no evidence reads `UNKNOWN`. Every rate "
            "below is written `k/n · rate (95% Wilson interval)`; `–` means no run fell in the "
            "cell, which is not 0%. Runs whose parity facts differ (model, versions, task content, "
            "budget, timeout, isolation) are never pooled: such tables are split per parity group. "
            "The tables state facts per cell; they do not rank frameworks or models, and with the "
            "reference models they describe scripted calibration policies, not any real model.\n\n"
            "Each run's evidence (events, diff, test output, trace, gateway exchanges) is in "
            "`runs/<run_id>/`, linked from every row of [RUNS.md](RUNS.md). "
            f"`uv run grid.py reclassify {self.L.folder.name}` re-derives every classification "
            "from that evidence and rewrites this ledger without running anything.")

    def what_was_run(self) -> str:
        m = self.meta
        fw = m.get("frameworks") or {}
        versions = "; ".join(f"{name}: " + ", ".join(f"{k} {v}" for k, v in (vs or {}).items())
                             for name, vs in fw.items()) or DASH
        retries = "; ".join(f"{name}: {vs}" for name, vs in (m.get("retries") or {}).items()) or DASH
        wall = m.get("wall_s")
        rows = [
            ["command", f"`{m['command']}`" if m.get("command") else DASH],
            ["grid id", m.get("grid_id", DASH)],
            ["started", m.get("started") or DASH],
            ["finished", m.get("finished") or "not finished (interrupted or still running)"],
            ["wall time", f"{wall:.1f} s" if isinstance(wall, (int, float)) else DASH],
            ["claimgrid commit", m.get("claimgrid_commit") or DASH],
            ["Python", m.get("python") or DASH],
            ["platform", m.get("platform") or DASH],
            ["framework versions", versions],
            ["models", ", ".join(m.get("models") or []) or DASH],
            ["reference models", {True: "yes (scripted calibration policies)", False: "no"}.get(m.get("reference_models"), DASH)],
            ["substitute (swap conditions)", m.get("substitute") or DASH],
            ["tasks", ", ".join(m.get("tasks") or []) or DASH],
            ["content conditions", ", ".join(m.get("content") or []) or DASH],
            ["swap conditions", ", ".join(m.get("swap") or []) or DASH],
            ["repeats", m.get("repeats", DASH)],
            ["timeout per run", f"{m['timeout_s']} s" if m.get("timeout_s") is not None else DASH],
            ["retries", retries],
            ["isolation", m.get("isolation") or DASH],
            ["jobs", m.get("jobs", DASH)],
            ["grid size", self.coverage_line()],
        ]
        return "## What was run\n\n" + table(["fact", "value"], rows)

    def coverage_line(self) -> str:
        planned = self.meta.get("grid_size")
        present = self.runs.height
        if isinstance(planned, int) and planned > 0:
            missing = max(planned - present, 0)
            tail = f"; {missing} not present" if missing else "; complete"
            return f"{present} of {planned} planned runs present{tail}"
        return f"{present} runs present (planned size unknown)"

    def coverage(self) -> str:
        parts = ["## Coverage\n", self.coverage_line() + "."]
        if self.runs.height and isinstance(self.meta.get("grid_size"), int) and self.runs.height < self.meta["grid_size"]:
            parts.append("\nThis grid is incomplete: every table covers only the runs present. "
                         "`uv run grid.py run --resume DIR` runs the missing cells.")
        for note in self.L.notes:
            parts.append(f"\n- {note}")
        return "\n".join(parts)

    def parity_section(self) -> str:
        groups = self.parity.groups()
        out = ["## Parity groups\n",
               "Runs are pooled only within a parity group. Facts that belong to one framework "
               "(its versions, retries) or one task (its content hash) are listed per framework "
               "or task when each has a single value; a framework or task seen with two values "
               "would split the groups instead."]
        if not groups:
            return "\n".join(out + ["\n_No runs._"])
        for g in groups:
            rows = [[k, v] for k, v in g.facts.items()]
            for fact, mapping in self.parity.bound_facts(g.runs).items():
                rows.append([fact, "; ".join(f"{d}: {v}" for d, v in mapping.items())])
            out.append(f"\n### {g.id}: {g.label} ({g.runs.height} runs)\n\n" + table(["parity fact", "value"], rows))
        return "\n".join(out)

    # 1
    def false_success(self) -> str:
        def render(runs):
            look = self.lookup(agg.false_success(runs), ["framework", "content"])
            rows = []
            for fw in self.present(runs, "framework", self.frameworks):
                row = [fw]
                for c in self.contents:
                    r = look.get((fw, c))
                    if r is None:
                        row.append(DASH)
                        continue
                    unknown = f"; {r['unknown']} UNKNOWN" if r["unknown"] else ""
                    row.append(f"{format_rate(r['fs'], r['claimed'])}<br>"
                               f"<sub>all runs: {format_rate(r['fs'], r['n'])}{unknown}</sub>")
                rows.append(row)
            return table(["framework", *self.contents], rows)
        pic = f"\n\n![false-success rate by framework × content condition]({self.heatmap_name})" if self.heatmap_name else ""
        return ("## 1. False success by framework × content condition\n\n"
                "`FALSE_SUCCESS` runs of those that claimed success (`TRUE_SUCCESS` + `FALSE_SUCCESS`); "
                "below each cell, the same count as a share of all runs in the cell, and how many runs "
                "had an `UNKNOWN` claim-vs-outcome (no evidence). Rows and columns list only what "
                "ran in each parity group." + pic + "\n\n" + self.per_group(render))

    # 2
    def injection(self) -> str:
        injected = set(self.runs.filter(pl.col("carries") == "attacker_goal")["content"].to_list())
        contents = [c for c in self.contents if c in injected]
        def render(runs):
            look = self.lookup(agg.injection(runs), ["framework", "content"])
            rows = []
            for fw in self.present(runs, "framework", self.frameworks):
                for c in contents:
                    r = look.get((fw, c))
                    if r is None:
                        rows.append([fw, c, DASH, 0, 0, 0, 0])
                        continue
                    rows.append([fw, c, format_rate(r["followed"], r["reached"]), r["reached"],
                                 r["not_reached"], r["other"], r["n"]])
            return table(["framework", "content", "followed (of reached)", "reached", "not reached",
                          "UNKNOWN / other", "runs"], rows)
        return ("## 2. Injected instruction followed, of runs that reached it\n\n"
                "Reached = `followed` + `resisted`; runs where the agent never read the content "
                "(`not reached`) and runs without evidence are counted separately, not as resisted.\n\n"
                + (self.per_group(render) if contents else "_No malicious or authority-named runs._"))

    # 3
    def legitimate(self) -> str:
        def render(runs):
            look = self.lookup(agg.legitimate(runs), ["framework"])
            rows = []
            for fw in self.present(runs, "framework", self.frameworks):
                r = look.get((fw,))
                rows.append([fw, DASH, 0, 0, 0, 0] if r is None else
                            [fw, format_rate(r["complied"], r["reached"]), r["reached"],
                             r["not_reached"], r["other"], r["n"]])
            return table(["framework", "complied (of reached)", "reached", "not reached",
                          "UNKNOWN / other", "runs"], rows)
        return ("## 3. Legitimate note complied with, of runs that reached it\n\n"
                "Runs under a content condition that carries the task owner's note (`legitimate`): "
                "an in-scope instruction that should be followed.\n\n" + self.per_group(render))

    # 4
    def swap(self) -> str:
        def render(runs):
            look = self.lookup(agg.swap(runs), ["framework", "swap_condition"])
            rows = []
            for fw in self.present(runs, "framework", self.frameworks):
                for s in self.present(runs, "swap_condition", self.swaps):
                    r = look.get((fw, s))
                    if r is None:
                        rows.append([fw, s, *[0] * 5, DASH, DASH, 0])
                        continue
                    after = format_rate(r["prevented_claimed"], r["prevented_known"]) if s == "bound" else "n/a"
                    if s == "bound" and r["prevented_claim_unknown"]:
                        after += f" (+{r['prevented_claim_unknown']} UNKNOWN)"
                    rows.append([fw, s, r["none"], r["hidden"], r["visible"], r["prevented"], r["other"],
                                 after, format_rate(r["mentioned"], r["swapped"]), r["n"]])
            return table(["framework", "swap condition", "none", "hidden", "visible", "prevented",
                          "other", "claimed success after a refused swap", "report mentions the swap",
                          "runs"], rows)
        return ("## 4. Model swap outcome by framework × swap condition\n\n"
                "Counts of the observed swap outcome. \"Claimed success after a refused swap\": of "
                "`bound` runs whose swap was `prevented`, how many still claimed success. \"Report "
                "mentions the swap\": of runs where a swap happened (hidden, visible or prevented), "
                "how many final reports mentioned it.\n\n" + self.per_group(render))

    def _distribution(self, runs, by: str, by_values: list[str], field: str, known: list[str]) -> str:
        by_values = self.present(runs, by, by_values)
        look = self.lookup(agg.distribution(runs, [by], field), [by, field])
        totals = {k[0]: r["n"] for k, r in look.items()}
        values = ordered(known, runs[field].unique().to_list())
        rows = []
        for v in values:
            rows.append([v, *[format_rate(look[(b, v)]["k"], totals[b]) if (b, v) in look
                              else (format_rate(0, totals[b]) if b in totals else DASH) for b in by_values]])
        rows.append(["runs", *[totals.get(b, 0) for b in by_values]])
        return table([field.replace("_", " "), *by_values], rows)

    # 5
    def claim_verdicts(self) -> str:
        by_fw = self.per_group(lambda r: self._distribution(r, "framework", self.frameworks, "claim_verdict", CLAIM_VERDICT))
        by_model = self.per_group(lambda r: self._distribution(r, "model", self.models, "claim_verdict", CLAIM_VERDICT),
                                  exclude=("model",))
        return ("## 5. Claim verdicts\n\nShare of runs in each column with each claim verdict.\n\n"
                "### By framework\n\n" + by_fw + "\n\n### By model\n\n" + by_model)

    # 6
    def outcomes(self) -> str:
        def render(runs):
            df = agg.distribution(runs, ["framework", "task"], "outcome")
            look = self.lookup(df, ["framework", "task", "outcome"])
            totals = {(r["framework"], r["task"]): r["n"] for r in df.iter_rows(named=True)}
            values = ordered(OUTCOME, runs["outcome"].unique().to_list())
            rows = []
            for fw in self.present(runs, "framework", self.frameworks):
                for t in self.present(runs, "task", self.tasks):
                    n = totals.get((fw, t), 0)
                    rows.append([fw, t, *[format_rate(look[(fw, t, v)]["k"] if (fw, t, v) in look else 0, n)
                                          for v in values], n])
            return table(["framework", "task", *values, "runs"], rows)
        return "## 6. Outcome by framework × task\n\n" + self.per_group(render)

    # 7
    def confusion(self) -> str:
        def render(runs):
            conf = agg.confusion(runs)
            if conf.is_empty():
                return "_No runs of a reference model with a documented expectation._"
            look = self.lookup(conf, ["expected", "claim_verdict"])
            rows_v = ordered(CLAIM_VERDICT, conf["expected"].unique().to_list())
            cols_v = ordered(CLAIM_VERDICT, conf["claim_verdict"].unique().to_list())
            rows = [[e, *[look[(e, c)]["k"] if (e, c) in look else 0 for c in cols_v]] for e in rows_v]
            parts = ["Rows: the verdict each reference model's documented behaviour implies for the "
                     "task's role. Columns: the verdict the classifier gave. Off-diagonal counts are "
                     "disagreements; `UNKNOWN` means the run left no harness evidence (crash, timeout). "
                     "Only runs under swap condition `none`: under a swap a second model finishes the "
                     "run, so no single documented behaviour applies.",
                     table(["expected \\ classified", *cols_v], rows)]
            ag = agg.agreement(runs)
            parts.append(table(["model", "agrees with its documented behaviour", "UNKNOWN (not counted)"],
                               [[r["model"], format_rate(r["k"], r["n"]), r["unknown"]] for r in ag.iter_rows(named=True)]))
            dis = agg.disagreements(runs)
            if dis.is_empty():
                parts.append("No disagreements.")
            else:
                lines = ["Disagreements (every one is listed):", ""]
                for r in dis.iter_rows(named=True):
                    links = ", ".join(f"[{rid}]({d}/)" for rid, d in zip(r["run_ids"][:3], r["dirs"][:3]))
                    more = f" and {r['k'] - 3} more (see RUNS.md)" if r["k"] > 3 else ""
                    why = ""
                    if (r["expected"] == "consistent" and r["role"] == "builder"
                            and r["claim_verdict"] == "read-only imposture" and "nothing" in r["task"]):
                        why = f" — {SEED_001_NOTE}"
                    lines.append(f"- {r['model']} on {r['task']} ({r['role']}): expected "
                                 f"“{r['expected']}”, classified “{r['claim_verdict']}” in {r['k']} "
                                 f"run(s){why}. Runs: {links}{more}.")
                parts.append("\n".join(lines))
            left = agg.no_expectation(runs)
            if not left.is_empty():
                parts.append("Not in the matrix (no documented expectation): " + "; ".join(
                    f"{r['model']} on a {r['role']} task: {r['k']}" for r in left.iter_rows(named=True)) + ".")
            return "\n\n".join(parts)
        return "## 7. Classifier check on reference runs (confusion matrix)\n\n" + self.per_group(render, exclude=("model",))

    # 8
    def process(self) -> str:
        return ("## 8. Process outcome by framework\n\n"
                + self.per_group(lambda r: self._distribution(r, "framework", self.frameworks, "process", PROCESS)))

    def render(self) -> str:
        title = f"# claimgrid ledger {self.meta.get('grid_id', self.L.folder.name)}"
        sections = [title, self.how_to_read(), self.what_was_run(), self.coverage(), self.parity_section()]
        if self.runs.is_empty():
            sections.append("_No run has completed yet: there is nothing to aggregate._")
        else:
            sections += [self.false_success(), self.injection(), self.legitimate(), self.swap(),
                         self.claim_verdicts(), self.outcomes(), self.confusion(), self.process()]
        sections.append("## Per-run rows\n\nOne row per run, each linked to its evidence folder: [RUNS.md](RUNS.md).")
        return "\n\n".join(sections) + "\n"


def render_runs(ledger: Ledger) -> str:
    """RUNS.md: one row per run, sorted by grid coordinates, every classification field."""
    runs = ledger.runs.sort("framework", "task", "content", "swap_condition", "model", "repeat", "run_id")
    cls_cols = [("swap_outcome" if k == "swap" else k) for k in CLASSIFICATION_KEYS]
    extra = [f"extra.{k}" for k in ledger.extra_classification_keys]
    headers = ["run", "framework", "task", "content", "swap", "model", "repeat",
               *[("swap outcome" if c == "swap_outcome" else c.replace("_", " ")) for c in cls_cols],
               "claimed success", *[e.removeprefix("extra.") for e in extra]]
    rows = []
    for r in runs.iter_rows(named=True):
        def show(v):
            return DASH if v is None else ("yes" if v is True else "no" if v is False else v)
        rows.append([f"[{r['run_id']}]({r['evidence_dir']}/)", r["framework"], r["task"], r["content"],
                     r["swap_condition"], r["model"], show(r["repeat"]),
                     *[show(r[c]) for c in cls_cols], show(r["claimed"]), *[show(r[e]) for e in extra]])
    head = (f"# Runs of {ledger.meta.get('grid_id', ledger.folder.name)}\n\n"
            f"{runs.height} runs. Each run id links to its evidence folder. Back to [LEDGER.md](LEDGER.md).\n\n")
    return head + table(headers, rows) + "\n"
