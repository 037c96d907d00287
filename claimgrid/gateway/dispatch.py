"""Who answers a model call: the harness's reference-model code, or the LiteLLM Router.

A call whose models (the assigned one, and the substitute after a swap) are all
reference models is answered by claimgrid.gateway.scripted, in the event loop, with no
LiteLLM. Any other call goes to the one LiteLLM Router of the gateway
(claimgrid.gateway.upstream), which is built, and LiteLLM imported, when a run naming a
real model is registered (Gateway.register, before its agent starts), else on the first
call that needs it: a grid of reference models never imports LiteLLM.

What the harness path saves against the Router, per call and at start-up, is measured by
``uv run bench/gateway.py --startup`` (figures in bench/README.md).
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from claimgrid.gateway import scripted as reference
from claimgrid.gateway.answer import Answer, harness_serves, reference_only
from claimgrid.reference.script import RunScript

if TYPE_CHECKING:  # imported for its type only: importing it imports LiteLLM (seconds)
    from claimgrid.gateway.providers import ModelRouter

REFERENCE_PATHS = ("harness", "router")


class LazyRouter:
    """The gateway's ModelRouter, built on first use (thread-safe, built once)."""

    def __init__(self) -> None:
        self._router: ModelRouter | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._router is not None

    def get(self) -> ModelRouter:
        """The ModelRouter; the first call imports LiteLLM (seconds)."""
        if self._router is None:
            with self._lock:
                if self._router is None:
                    from claimgrid.gateway.providers import ModelRouter

                    self._router = ModelRouter()
        return self._router

    async def aget(self) -> ModelRouter:
        """``get`` from the event loop: the first build runs in a worker thread, so the
        seconds LiteLLM's import takes do not stall the other runs' calls."""
        if self._router is not None:
            return self._router
        return await asyncio.to_thread(self.get)


class Dispatcher:
    """Answers one call of a run (never a ``bound`` swap: the app refuses those itself).

    ``reference_path="router"`` sends reference models through the Router as they
    all went before the harness answered them itself; it is kept so that tests/integration/gateway/test_gateway_reference_parity.py and
    bench/gateway.py can compare the two paths. ``router`` may be a LazyRouter to share.
    """

    def __init__(self, retry=None, reference_path: str = "harness", router: LazyRouter | None = None):
        if reference_path not in REFERENCE_PATHS:
            raise ValueError(f"reference_path must be one of {REFERENCE_PATHS}, not {reference_path!r}")
        self.retry = retry
        self.reference_path = reference_path
        self.router = router or LazyRouter()

    def needs_router(self, script: RunScript) -> bool:
        """True when some call of the run may go to the Router."""
        return self.reference_path == "router" or not reference_only(script)

    async def answer(
        self,
        script: RunScript,
        swap: str,
        body: dict,
        requested: str | None,
        run=None,
        call_index: int = 0,
        fault: str | None = None,
    ) -> Answer:
        """``run`` / ``call_index`` / ``fault``: the run's progress, this call's index and the
        gateway fault applied to it, for reference models (claimgrid.gateway.scripted.answer)."""
        if self.reference_path == "harness" and harness_serves(script, swap):
            return reference.answer(script, swap, body, requested, run, call_index, fault)
        router = await self.router.aget()  # LiteLLM is imported here, in a worker thread
        from claimgrid.gateway.upstream import call_model  # after the Router: LiteLLM is already loaded

        return await call_model(router, script, swap, body, requested, self.retry, (run, call_index, fault))
