"""Rates with honest uncertainty: the Wilson score interval, a task-clustered interval and
the ledger's rate format.

Rules: every rate carries its numerator and denominator; an empty
denominator is "–" (no runs means no rate, never 0%); percentages round half-up
(2/16 prints 13%, not banker's 12%). Intervals are shown only where sampling happened:
deterministic runs (reference models) get none, because each cell is one outcome;
with a stochastic model and repeats >= 2 a cell gets a 95% Wilson interval, and a rate
pooled over tasks gets an interval that treats the task as the cluster.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

DASH = "–"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval for ``k`` successes out of ``n`` trials.

    Returns ``(low, high)`` as fractions in [0, 1], or ``None`` when ``n == 0`` (no
    interval exists). ``z=1.96`` gives the 95% interval. Raises ValueError when
    ``k`` is outside ``0..n``.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # Float noise must not turn k=0 into a positive bound or k=n into 0.9999...
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def clustered(counts: list[tuple[int, int]], z: float = 1.96) -> tuple[float, float] | None:
    """95% interval for a proportion pooled over clusters (tasks), ``counts`` = [(k_c, n_c)].

    The ratio estimator p = sum k / sum n with the cluster-robust (sandwich) variance
    C/(C-1) * sum((k_c - p n_c)^2) / N^2: runs of one task are not independent trials.
    None with fewer than two clusters (no between-cluster variance can be estimated).
    """
    counts = [(k, n) for k, n in counts if n > 0]
    total = sum(n for _, n in counts)
    c = len(counts)
    if c < 2 or total == 0:
        return None
    p = sum(k for k, _ in counts) / total
    var = c / (c - 1) * sum((k - p * n) ** 2 for k, n in counts) / total**2
    half = z * math.sqrt(var)
    return max(0.0, p - half), min(1.0, p + half)


def half_up(x: float, digits: int = 0) -> Decimal:
    """``x`` rounded half-up (0.125 -> 0.13 at 2 digits), via its shortest decimal repr."""
    q = Decimal(1).scaleb(-digits)
    return Decimal(repr(x)).quantize(q, rounding=ROUND_HALF_UP)


def pct(x: float) -> str:
    """A fraction as a whole percentage, half-up ("13%" for 0.125); "<1%" / ">99%" at the edges."""
    v = 100 * x
    if 0 < v < 1:
        return "<1%"
    if 99 < v < 100:
        return ">99%"
    return f"{half_up(v)}%"


def ratio_pct(k: int, n: int) -> str:
    """``k/n`` as a half-up whole percentage, computed exactly (no float error at .5)."""
    if n == 0:
        return DASH
    v = Decimal(100 * k) / Decimal(n)
    if 0 < v < 1:
        return "<1%"
    if 99 < v < 100:
        return ">99%"
    return f"{v.quantize(Decimal(1), rounding=ROUND_HALF_UP)}%"


def format_rate(k: int, n: int, interval: tuple[float, float] | None | bool = True) -> str:
    """``"k/n · r%"`` plus ``" (lo–hi%)"`` when an interval applies; ``"–"`` when ``n == 0``.

    ``interval``: True = the Wilson interval of k/n; a (low, high) pair = that interval
    (e.g. :func:`clustered`); False/None = no interval (deterministic runs).
    Example: ``format_rate(3, 10) == "3/10 · 30% (11–60%)"``; ``format_rate(2, 16, False) == "2/16 · 13%"``.
    """
    if n == 0:
        return DASH
    text = f"{k}/{n} · {ratio_pct(k, n)}"
    ci = wilson(k, n) if interval is True else (interval or None)
    if ci:
        lo, hi = ci
        text += f" ({pct(lo).rstrip('%')}–{pct(hi)})"
    return text


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for a paired comparison with ``b`` and ``c`` discordant pairs.

    ``b``: pairs where the first arm has the outcome and the second does not; ``c``: the other way.
    Under no difference each discordant pair is a fair coin, so the p-value is the exact binomial
    two-sided tail ``min(1, 2 * P(X <= min(b, c)))`` for ``X ~ Binomial(b + c, 1/2)``; concordant
    pairs carry no information and do not enter. ``b == c == 0`` gives 1.0 (nothing to test).
    Example: ``mcnemar_exact(0, 6) == 2 / 64 == 0.03125``. Exact with integers (no float sums
    of tiny terms). Raises ValueError on a negative count.
    """
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact needs b, c >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def holm(pvalues: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order (family-wise error control).

    Sorted ascending, the i-th smallest (0-based) is multiplied by ``m - i``, made
    non-decreasing, and capped at 1; a test says "different" at level alpha when its adjusted
    p-value is below alpha. ``holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]``.
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def p_text(p: float) -> str:
    """A p-value for the ledger: three significant digits, "<0.001" below that, "1" at 1."""
    if p >= 1.0:
        return "1"
    if p < 0.001:
        return "<0.001"
    return f"{p:.3g}"
