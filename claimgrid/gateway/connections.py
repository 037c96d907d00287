"""Per-provider connection limits: at most N calls in flight to one real provider.

``grid.py run --max-connections N`` (every provider) or ``--max-connections openai=8``
(one provider; repeatable), as Inspect's ``--max-connections``. A call over the limit
waits in the gateway for a free connection; the wait is recorded in the exchange event
as ``queued_ms`` (and is part of ``latency_ms``), so a slow answer caused by the harness's
own queue is told apart from a slow provider. Reference models have no provider and no
limit: they are answered in the gateway's own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from claimgrid.reference import registry

DEFAULT_PER_PROVIDER = 10  # Inspect's default max_connections


def provider_of(model: str) -> str:
    """The provider a LiteLLM model string goes to: its ``provider/`` prefix, else LiteLLM's
    own inference (``gpt-4o`` -> ``openai``). Real models only: imports LiteLLM."""
    import litellm

    from claimgrid.gateway import offline  # noqa: F401  (must precede the LiteLLM import)

    litellm.suppress_debug_info = True  # no provider-list banner for a string it cannot place
    try:
        return litellm.get_llm_provider(model)[1]
    except Exception:  # LiteLLM raises for a string it cannot place; the prefix still groups it
        return model.split("/", 1)[0] if "/" in model else model


def parse_limits(values: list[str] | None) -> tuple[int, dict[str, int]]:
    """``(default, per provider)`` from ``--max-connections`` values (``N`` or ``PROVIDER=N``).

    Raises ValueError with a one-line message naming the bad value."""
    default, per = DEFAULT_PER_PROVIDER, {}
    for raw in values or []:
        name, sep, count = raw.rpartition("=") if "=" in raw else ("", "", raw)
        try:
            n = int(count.strip())
        except ValueError:
            raise ValueError(f"--max-connections: '{raw}' is not N or PROVIDER=N with N a whole number") from None
        if not 1 <= n <= 10_000:
            raise ValueError(f"--max-connections: '{raw}': N must be 1 to 10000")
        if sep:
            if not name.strip():
                raise ValueError(f"--max-connections: '{raw}' names no provider before '='")
            per[name.strip()] = n
        else:
            default = n
    return default, per


class Connections:
    """Asyncio semaphores per provider, created on first use; lives on the gateway's loop."""

    def __init__(self, default: int = DEFAULT_PER_PROVIDER, per_provider: dict[str, int] | None = None):
        self.default, self.per_provider = default, dict(per_provider or {})
        self._sems: dict[str, asyncio.Semaphore] = {}
        self.peak: dict[str, int] = {}
        self._in_use: dict[str, int] = {}

        self._provider: dict[str, str | None] = {}

    def limit(self, provider: str) -> int:
        return self.per_provider.get(provider, self.default)

    def for_model(self, model: str):
        """The slot for a call answered by ``model``: a provider's slot for a real model, a
        slot that never waits (yields None) for a reference model."""
        if model not in self._provider:
            self._provider[model] = None if registry.is_reference(model) else provider_of(model)
        provider = self._provider[model]
        return self.slot(provider) if provider is not None else contextlib.nullcontext()

    @contextlib.asynccontextmanager
    async def slot(self, provider: str):
        """Hold one of ``provider``'s connections; yields the milliseconds spent waiting."""
        sem = self._sems.get(provider)
        if sem is None:
            sem = self._sems[provider] = asyncio.Semaphore(self.limit(provider))
        t0 = time.perf_counter()
        async with sem:
            used = self._in_use[provider] = self._in_use.get(provider, 0) + 1
            self.peak[provider] = max(self.peak.get(provider, 0), used)
            try:
                yield round((time.perf_counter() - t0) * 1000, 3)
            finally:
                self._in_use[provider] -= 1

    def facts(self) -> dict:
        """The limits and the peak concurrent calls seen per provider (grid meta)."""
        return {"default": self.default, "per_provider": dict(self.per_provider), "peak": dict(self.peak)}
