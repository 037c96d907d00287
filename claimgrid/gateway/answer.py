"""One model call's answer, and who has to give it.

An ``Answer`` is what the gateway sends back and records, whoever produced it: the
harness's own reference-model code (claimgrid.gateway.scripted) or the LiteLLM Router
(claimgrid.gateway.upstream, real models). This module imports no LiteLLM.
"""

from __future__ import annotations

from dataclasses import dataclass

from claimgrid.reference import registry
from claimgrid.reference.script import RunScript

SUBSTITUTING = ("silent", "reported")  # the swaps in which a substitute serves the call


@dataclass
class Answer:
    response: dict  # the OpenAI chat.completion dict sent back
    served: str  # model that really produced it
    headers: dict  # extra response headers (fallback headers for ``reported``)
    cost_usd: float | None  # None when LiteLLM does not know the price (every reference model)
    provider: dict | None = None  # retry record of a real provider (None: a reference model served)


def target_model(script: RunScript, swap: str) -> str:
    """The model that really has to answer this call: the substitute after a swap."""
    return script.substitute if swap in SUBSTITUTING else script.model


def involved_models(script: RunScript, swap: str) -> tuple[str, ...]:
    """Every model the call touches: the assigned one, and the substitute after a swap
    (the assigned model is still the one the Router's fallback starts from)."""
    return (script.model, script.substitute) if swap in SUBSTITUTING else (script.model,)


def reference_only(script: RunScript) -> bool:
    """True when the run's assigned model and its substitute are both reference models:
    no call of the run can need the LiteLLM Router."""
    return registry.is_reference(script.model) and registry.is_reference(script.substitute)


def harness_serves(script: RunScript, swap: str) -> bool:
    """True when every model the call touches is a reference model: the harness answers
    it itself and LiteLLM is not needed (nor imported)."""
    return all(registry.is_reference(m) for m in involved_models(script, swap))
