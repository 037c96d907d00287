"""Whether LiteLLM's bundled price map knows a model (so a cost is not invented).

Imports LiteLLM (offline switches first) only when asked about a real model: a
reference model never has a price, and a reference-only grid never imports LiteLLM.
"""

from __future__ import annotations

from claimgrid.gateway import offline  # noqa: F401  (must precede the LiteLLM import)
from claimgrid.reference import registry


def has_price(model: str) -> bool:
    """True when LiteLLM's bundled price map has a per-token price for ``model``."""
    if registry.is_reference(model):
        return False
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # LiteLLM raises for a model missing from its price map
        return False
    return bool(info.get("input_cost_per_token") or info.get("output_cost_per_token"))
