"""Framework differences on a stochastic model, tested as paired comparisons on the same cells.

Contract: :func:`framework_tests` ``(rows, frameworks, models) -> list[PairTest]``.
Two frameworks are paired on a cell = the same task × content × swap condition × model ×
repeat index. For each stochastic model, each outcome of :data:`OUTCOMES` (a
``claim_vs_outcome`` value: the run's TRUE_SUCCESS rate, its FALSE_SUCCESS rate) and each
framework pair, the exact McNemar test (:func:`claimgrid.ledger.stats.mcnemar_exact`) is run
on the discordant cells; pairs where either run's ``claim_vs_outcome`` is UNKNOWN are left
out (and counted). The p-values of all tests in the ledger form one family, adjusted by Holm
(:func:`claimgrid.ledger.stats.holm`); a difference is stated only when the adjusted p-value
is below :data:`ALPHA` (0.05). For a stated difference, ``repeats_needed`` is the smallest r <= the
ledger's repeats for which the same family computed on repeat indices 1..r already states it.

Deterministic reference models are not tested: their repeats are identical, so there is
nothing to sample (their cells are compared one by one in the divergence table).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from claimgrid.ledger.stats import holm, mcnemar_exact, p_text

OUTCOMES = ("TRUE_SUCCESS", "FALSE_SUCCESS")
ALPHA = 0.05
CORRECTION = "Holm"
CELL = ("task", "content", "swap_condition", "model", "repeat")


@dataclass(frozen=True)
class PairTest:
    """One exact McNemar test: ``a`` and ``b`` on ``model``'s paired cells, for ``outcome``."""

    model: str
    outcome: str
    a: str
    b: str
    n: int  # paired cells with a known claim_vs_outcome in both runs
    a_only: int  # cells where a had the outcome and b did not
    b_only: int
    unknown: int  # paired cells left out: UNKNOWN in either run
    p: float
    p_adj: float = 1.0
    differs: bool = False
    repeats_needed: int | None = None

    def result(self) -> str:
        """The ledger's words: a stated difference, or "no difference shown (n=…, p=…)"."""
        if not self.differs:
            return f"no difference shown (n={self.n}, p={p_text(self.p_adj)})"
        more, less = (self.a, self.b) if self.a_only > self.b_only else (self.b, self.a)
        return (
            f"{more} more often than {less} ({max(self.a_only, self.b_only)} vs {min(self.a_only, self.b_only)} "
            f"discordant cells of n={self.n}, p={p_text(self.p_adj)})"
        )


def _tests(rows: list[dict], frameworks: list[str], models: list[str], repeats: set | None) -> list[PairTest]:
    by_cell: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if r["model"] in models and (repeats is None or r["repeat"] in repeats):
            by_cell.setdefault(tuple(r[k] for k in CELL), {})[r["framework"]] = r
    out = []
    for m in models:
        cells = [fws for k, fws in by_cell.items() if k[3] == m]
        for outcome in OUTCOMES:
            for a, b in combinations(frameworks, 2):
                both = [(fws[a], fws[b]) for fws in cells if a in fws and b in fws]
                if not both:
                    continue
                known = [(x, y) for x, y in both if "UNKNOWN" not in (x["claim_vs_outcome"], y["claim_vs_outcome"])]
                a_only = sum(x["claim_vs_outcome"] == outcome != y["claim_vs_outcome"] for x, y in known)
                b_only = sum(y["claim_vs_outcome"] == outcome != x["claim_vs_outcome"] for x, y in known)
                out.append(
                    PairTest(
                        m,
                        outcome,
                        a,
                        b,
                        len(known),
                        a_only,
                        b_only,
                        len(both) - len(known),
                        mcnemar_exact(a_only, b_only),
                    )
                )
    adjusted = holm([t.p for t in out])
    return [PairTest(**{**t.__dict__, "p_adj": q, "differs": q < ALPHA}) for t, q in zip(out, adjusted, strict=True)]


def framework_tests(rows: list[dict], frameworks: list[str], models: list[str]) -> list[PairTest]:
    """Every framework pair × outcome × model of ``models`` (the stochastic ones), Holm-adjusted
    as one family at level :data:`ALPHA`; stated differences carry the repeats they needed."""
    full = _tests(rows, frameworks, models, None)
    if not any(t.differs for t in full):
        return full
    reps = sorted({r["repeat"] for r in rows if r["model"] in models and r["repeat"] is not None})
    needed: dict[tuple, int] = {}
    for r in range(1, len(reps) + 1):
        for t in _tests(rows, frameworks, models, set(reps[:r])):
            key = (t.model, t.outcome, t.a, t.b)
            if t.differs and key not in needed:
                needed[key] = r
    return [
        PairTest(**{**t.__dict__, "repeats_needed": needed.get((t.model, t.outcome, t.a, t.b))}) if t.differs else t
        for t in full
    ]
