"""The harness model gateway (docs/DESIGN.md, "The gateway"): one loopback endpoint speaking three API
dialects (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses), reference models answered by harness code, real models through one LiteLLM Router, the
four swap conditions, and a per-run log of every exchange (CONTRACTS: source ``gateway``).

Importing this package, starting a gateway and serving reference models do not import
LiteLLM (seconds of CPU; bench/README.md). It is imported, after LiteLLM's offline switches are set, only for a
real model: the gateway's first call to one, ``preflight`` of one, its price lookup.
"""

from __future__ import annotations

from claimgrid.gateway import offline  # noqa: F401  (offline switches before anyone imports LiteLLM)

# Imported here, not inside a function: importing the submodule ``preflight`` later would
# rebind ``claimgrid.gateway.preflight`` to the module and a second grid in the same
# process would call a module. preflight.py imports LiteLLM only when called.
from claimgrid.gateway.preflight import preflight
from claimgrid.gateway.server import Gateway
from claimgrid.reference.script import REFERENCE_MODEL_NAMES, RunScript

__all__ = ["Gateway", "RunScript", "REFERENCE_MODEL_NAMES", "preflight"]
