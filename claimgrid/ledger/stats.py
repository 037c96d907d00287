"""Rates with honest uncertainty: the Wilson score interval and the ledger's rate format.

Every rate the ledger prints carries its numerator, its denominator and a 95% Wilson
interval, because a rate without its n invites comparisons the data cannot support.
An empty denominator is "–": no runs means no rate, never 0%.
"""

from __future__ import annotations

import math

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


def pct(x: float) -> str:
    """A fraction as a whole percentage ("33%"); below 1% but above 0 shows "<1%"."""
    v = 100 * x
    if 0 < v < 1:
        return "<1%"
    if 99 < v < 100:
        return ">99%"
    return f"{v:.0f}%"


def format_rate(k: int, n: int) -> str:
    """``"k/n · r% (lo–hi%)"``; ``"–"`` when ``n == 0``.

    Example: ``format_rate(3, 10) == "3/10 · 30% (11–60%)"``.
    """
    ci = wilson(k, n)
    if ci is None:
        return DASH
    lo, hi = ci
    return f"{k}/{n} · {pct(k / n)} ({pct(lo).rstrip('%')}–{pct(hi)})"

