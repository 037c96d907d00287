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
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from claimgrid.ledger.names import NOT_RECORDED

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

    def __init__(self, runs: pl.DataFrame, facts: list[str]):
        self.runs = runs
        self.facts = facts
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
        runs = self.runs if runs is None else runs
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
            label = " · ".join(f"{_short(c)} {facts[c]}" for c in varying) or "all runs"
            out.append(Group(f"P{i}", label, {_short(c): v for c, v in facts.items()}, sub))
        return out

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
