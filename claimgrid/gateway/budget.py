"""Running totals of a grid's model spend, kept by the gateway (``Gateway.spend``).

Every exchange the gateway records adds its tokens and its ``cost_usd`` (LiteLLM's bundled
price map). A call whose price LiteLLM does not know counts tokens only: it is counted in
``unpriced_calls`` and its model named in ``unpriced_models``, so a cost total is never
presented as complete when it is not. Reference models are unpriced and their tokens are
estimates (4 characters per token).

The grid (claimgrid.commands.run) asks ``over(limits)`` before it starts each run: runs already in
flight finish, no new run starts. Per-model provider counts (calls, retries, failures)
feed the ledger's harness health.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_cost_usd: float | None = None
    max_tokens: int | None = None

    def any(self) -> bool:
        return self.max_cost_usd is not None or self.max_tokens is not None

    def as_dict(self) -> dict:
        return {"max_cost_usd": self.max_cost_usd, "max_tokens": self.max_tokens}


class Spend:
    """Thread-safe totals over every exchange of the grid (all runs, all models)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cost_usd = 0.0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls = 0
        self.priced_calls = 0
        self.unpriced_calls = 0
        self.unpriced_models: set[str] = set()
        self.providers: dict[str, dict] = {}

    def add(self, event: dict) -> None:
        """Count one ``source: gateway`` exchange event."""
        with self._lock:
            self.calls += 1
            usage = event.get("usage") or {}
            self.prompt_tokens += usage.get("prompt_tokens") or 0
            self.completion_tokens += usage.get("completion_tokens") or 0
            served = event.get("served_model")
            if event.get("cost_usd") is not None:
                self.cost_usd += float(event["cost_usd"])
                self.priced_calls += 1
            elif served:
                self.unpriced_calls += 1
                self.unpriced_models.add(served)
            provider = event.get("provider")
            if provider:
                p = self.providers.setdefault(provider.get("model") or "?", {"calls": 0, "retries": 0, "failures": 0})
                p["calls"] += 1
                p["retries"] += provider.get("retries") or 0
                p["failures"] += 1 if provider.get("failed") else 0

    def merge(self, other: Spend) -> None:
        """Add ``other``'s totals to these."""
        with self._lock:
            self.cost_usd += other.cost_usd
            self.prompt_tokens += other.prompt_tokens
            self.completion_tokens += other.completion_tokens
            self.calls += other.calls
            self.priced_calls += other.priced_calls
            self.unpriced_calls += other.unpriced_calls
            self.unpriced_models |= other.unpriced_models
            for model, p in other.providers.items():
                mine = self.providers.setdefault(model, {"calls": 0, "retries": 0, "failures": 0})
                for k in mine:
                    mine[k] += p.get(k, 0)

    def copy_from(self, other: Spend) -> None:
        """Become a copy of ``other``'s totals."""
        fresh = Spend()
        fresh.merge(other)
        with self._lock:
            for k, v in vars(fresh).items():
                if k != "_lock":
                    setattr(self, k, v)

    def add_events(self, events: list[dict]) -> None:
        for e in events:
            if e.get("source") == "gateway" and e.get("kind") == "exchange":
                self.add(e)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def over(self, limits: Limits) -> str | None:
        """The name of the limit reached (``max_cost_usd`` / ``max_tokens``), or None."""
        with self._lock:
            if limits.max_cost_usd is not None and self.cost_usd >= limits.max_cost_usd:
                return "max_cost_usd"
            if limits.max_tokens is not None and self.prompt_tokens + self.completion_tokens >= limits.max_tokens:
                return "max_tokens"
        return None

    def snapshot(self) -> dict:
        """The figures written into meta.json (``spend``)."""
        with self._lock:
            return {
                "cost_usd": round(self.cost_usd, 8),
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "tokens": self.prompt_tokens + self.completion_tokens,
                "calls": self.calls,
                "priced_calls": self.priced_calls,
                "unpriced_calls": self.unpriced_calls,
                "unpriced_models": sorted(self.unpriced_models),
                # False when some calls had no known price: cost_usd then covers only the priced ones.
                "cost_complete": self.unpriced_calls == 0,
                "providers": {m: dict(v) for m, v in sorted(self.providers.items())},
            }

    def line(self, done: int, total: int) -> str:
        """``$0.0123 (projected $0.45) 12,345 tok (projected 456,789)`` for the progress line;
        the projection scales the spend per finished run to the whole grid."""
        with self._lock:
            cost, tokens = self.cost_usd, self.prompt_tokens + self.completion_tokens
            priced, unpriced = self.priced_calls, self.unpriced_calls
        proj = done >= 1 and total > done
        if priced:
            text = f"${cost:.4f}" + (" +unpriced calls" if unpriced else "")
            if proj:
                text += f" (proj. ${cost / done * total:.4f})"
        else:
            text = "cost unknown (unpriced)" if unpriced else "$0"
        text += f", {tokens:,} tok"
        if proj:
            text += f" (proj. {int(tokens / done * total):,})"
        return text
