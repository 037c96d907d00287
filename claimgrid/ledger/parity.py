"""Parity groups: which runs may be pooled into one aggregate.

Two runs are comparable only when the conditions that could change the result, other
than the ones a table deliberately compares, are the same: the model, the substitute,
the framework and LiteLLM versions, the task content (hash), the budget, the timeout,
the retries, the isolation mode. Those facts travel with every run (``parity``).

Rule used here:

- A fact bound to a grid dimension (framework versions and retries are bound to the
  framework, ``task_hash`` to the task) is *accounted for* when each framework (task)
  has exactly one value across the ledger: then the framework (task) column itself
  says which build ran, and the fact is stated per group instead of splitting it.
  If a framework ran with two versions, the fact is part of the group key.
- Every other fact, and the run's model, is part of the group key. A table that does
  not break down by model is therefore one table per model.
- A table that breaks down by a column passes that column in ``exclude`` so the fact
  it compares (e.g. ``model`` in the by-model table) does not split it.

Only a fact that could change a run's result is parity (:func:`parity_value`): a path of the
machine that ran it (the guard's binary, a checkout's folder), and a limit no run of the ledger
reached (a per-call deadline derived from a measured server speed), are provenance. They stay
in the records and meta.json and never split a group. A group is named by what sets it apart,
in a short label (``per-call deadline 890 s``), never by its facts' whole JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

from claimgrid.classify.limits import NAMES as LIMIT_NAMES
from claimgrid.classify.limits import UNITS as LIMIT_UNITS
from claimgrid.ledger.names import NOT_RECORDED
from claimgrid.machinepaths import find

# A budget key and the limit (claimgrid.classify.limits) whose hit makes it matter to a result.
BUDGET_LIMITS = {
    "model_call_timeout_s": "call_deadline",
    "max_output_tokens": "output_cap",
    "max_model_calls": "turns",
    "max_run_tokens": "run_tokens",
}
# Budget keys set from a measurement (a local server's speed), and the limit that makes them matter.
MEASURED = {"model_call_timeout_s": "call_deadline"}
# Provenance inside a parity fact: which file ran, never which build (the version says that).
PROVENANCE_KEYS = {"guard": ("bwrap",)}
LABEL_CHARS = 100  # a longer label points to the appendix instead


def _strip(value, fact: str, reached: frozenset[str] | None, top: bool = True):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if top and k in PROVENANCE_KEYS.get(fact, ()):
                continue
            if top and fact == "budget" and reached is not None and k in MEASURED and MEASURED[k] not in reached:
                continue  # a deadline derived from a measured speed that no run reached: provenance
            if isinstance(v, str) and find(v):
                continue  # a path of the machine that ran it
            out[k] = _strip(v, fact, reached, False)
        return out
    if isinstance(value, list):
        return [_strip(v, fact, reached, False) for v in value]
    return value


def parity_value(fact: str, value: str, reached: frozenset[str] | None = None) -> str:
    """``value`` (a parity column's string) with its provenance left out (module docstring).

    ``reached``: the limit kinds some run of the ledger hit; ``None`` keeps every budget key."""
    if not isinstance(value, str) or not value.startswith("{"):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return json.dumps(_strip(parsed, fact, reached), sort_keys=True, separators=(",", ":"))


def _flat(prefix: str, value) -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out |= _flat(f"{prefix}.{k}", v)
        return out
    return {prefix: value}


def _leaves(col: str, value: str) -> dict[str, object]:
    fact = col.removeprefix("parity.")
    try:
        parsed = json.loads(value) if value.startswith("{") else value
    except ValueError:
        parsed = value
    return _flat(fact, parsed)


def _name(path: str, value) -> str:
    """One differing fact in words: ``per-call deadline 890 s``, else ``path value``."""
    fact, _, key = path.partition(".")
    if fact == "budget" and key in BUDGET_LIMITS:
        kind = BUDGET_LIMITS[key]
        return (
            f"{LIMIT_NAMES[kind]} {value:g} {LIMIT_UNITS[kind]}"
            if isinstance(value, (int, float))
            else f"{LIMIT_NAMES[kind]} {value}"
        )
    shown = value if isinstance(value, (str, int, float)) or value is None else json.dumps(value, sort_keys=True)
    return f"{path} {shown}"


def reached_limits(ledger) -> frozenset[str]:
    """The limit kinds any run of ``ledger`` hit (claimgrid.classify.limits), faults included."""
    return frozenset(
        str(h.limit if hasattr(h, "limit") else h.get("limit"))
        for rec in ledger.records.values()
        for h in rec.limit_hits or []
    )


FRAMEWORK_BOUND = ("framework_version", "framework_versions", "versions", "litellm_version", "retries")
TASK_BOUND = ("task_hash",)
SWAP_BOUND = ("swap_from_call",)  # the swap condition's call index: one value per swap condition


@dataclass
class Group:
    """One parity group: ``label`` names the facts that set it apart, ``facts`` are all of them."""

    id: str
    label: str
    facts: dict[str, str]
    runs: pl.DataFrame


class Parity:
    """Parity facts of one ledger's runs and the grouping rules above."""

    def __init__(self, runs: pl.DataFrame, facts: list[str], reached: frozenset[str] | None = None):
        self.reached = reached
        self.facts = facts
        self.runs = self.normalised(runs)
        self.accounted: dict[str, str] = {}  # fact -> the column that accounts for it
        for fact in facts:
            dim = (
                "framework"
                if fact in FRAMEWORK_BOUND
                else "task"
                if fact in TASK_BOUND
                else "swap_condition"
                if fact in SWAP_BOUND
                else None
            )
            if dim is None or runs.is_empty():
                continue
            worst = runs.group_by(dim).agg(pl.col(f"parity.{fact}").n_unique().alias("k"))["k"].max()
            if worst == 1:
                self.accounted[fact] = dim

    def key_columns(self, exclude: tuple[str, ...] = ()) -> list[str]:
        """The columns whose values must match for runs to be pooled."""
        cols = [] if "model" in exclude else ["model"]
        for fact in self.facts:
            if fact in self.accounted or fact in exclude:
                continue
            # parity.model normally repeats the run's model column; it only adds a key
            # when the two disagree somewhere (e.g. a record without parity facts).
            if fact == "model" and ("model" in exclude or self._model_fact_redundant()):
                continue
            cols.append(f"parity.{fact}")
        return cols

    def _model_fact_redundant(self) -> bool:
        return bool((self.runs["model"] == self.runs["parity.model"]).all())

    def bound_facts(self, runs: pl.DataFrame) -> dict[str, dict[str, str]]:
        """Accounted-for facts as ``{fact: {framework-or-task: value}}`` for ``runs``."""
        out = {}
        for fact, dim in sorted(self.accounted.items()):
            pairs = runs.select(dim, f"parity.{fact}").unique().sort(dim).rows()
            out[fact] = {d: v for d, v in pairs}
        return out

    def groups(self, runs: pl.DataFrame | None = None, exclude: tuple[str, ...] = ()) -> list[Group]:
        """Split ``runs`` (default: all) into parity groups, in a stable order.

        Group ids are ``P1``, ``P2``... numbered over the whole ledger for the same
        ``exclude``, so a group keeps its id in every table that uses the same rule.
        """
        runs = self.runs if runs is None else self.normalised(runs)
        cols = self.key_columns(exclude)
        if not cols:
            return [Group("P1", "all runs", {}, runs)] if not runs.is_empty() else []
        all_keys = self.runs.select(cols).unique().sort(cols).rows()
        varying = [c for c in cols if self.runs[c].n_unique() > 1]
        out = []
        for i, key in enumerate(all_keys, 1):
            facts = dict(zip(cols, key))
            sub = runs.filter(pl.all_horizontal([pl.col(c) == v for c, v in facts.items()]))
            if sub.is_empty():
                continue
            out.append(Group(f"P{i}", "", {_short(c): v for c, v in facts.items()}, sub))
        labels = self.labels([{c: g.facts[_short(c)] for c in varying} for g in out])
        for g, label in zip(out, labels):
            g.label = label or "all runs"
        return out

    def normalised(self, runs: pl.DataFrame) -> pl.DataFrame:
        """``runs`` with each parity column's provenance left out (:func:`parity_value`)."""
        cols = [f"parity.{f}" for f in self.facts if f"parity.{f}" in runs.columns]
        if not cols or runs.is_empty():
            return runs
        values = {
            c: [parity_value(c.removeprefix("parity."), v, self.reached) for v in runs[c].to_list()] for c in cols
        }
        return runs.with_columns(pl.Series(c, v, dtype=pl.String) for c, v in values.items())

    @staticmethod
    def labels(keys: list[dict[str, str]]) -> list[str]:
        """Each group's short label: only the facts (leaf keys) whose values differ between groups."""
        flat = [{p: v for c, val in key.items() for p, v in _leaves(c, val).items()} for key in keys]
        paths = sorted({p for f in flat for p in f})
        differ = [p for p in paths if len({json.dumps(f.get(p), sort_keys=True) for f in flat}) > 1]
        out = []
        for f in flat:
            label = " · ".join(_name(p, f.get(p, "not recorded")) for p in differ)
            out.append(label if len(label) <= LABEL_CHARS else f"{len(differ)} facts differ (appendix)")
        return out

    @staticmethod
    def line(groups: list[Group]) -> str:
        """All groups in one short line: ``P1/P2: per-call deadline 890 s / 95 s`` when one fact
        differs, else each group with its label."""
        if len(groups) <= 1:
            return groups[0].label if groups else "none"
        return "; ".join(f"{g.id}: {g.label}" for g in groups)

    def split_note(self, groups: list[Group]) -> str | None:
        """One sentence saying a table was split, and by which facts; None if it was not."""
        if len(groups) <= 1:
            return None
        return (
            f"Split into {len(groups)} tables, one per parity group: these runs differ in "
            "parity facts and are not pooled."
        )


def _short(col: str) -> str:
    return col.removeprefix("parity.")


def describe(value: str) -> str:
    return value if value != NOT_RECORDED else "*not recorded*"
