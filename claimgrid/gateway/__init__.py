"""The harness model gateway (DESIGN section 4): one loopback OpenAI-compatible endpoint
holding one LiteLLM Router, reference models as a LiteLLM custom provider, the four swap
conditions, and a per-run log of every exchange (CONTRACTS: source ``gateway``).

Importing this package does not import LiteLLM (slow); ``Gateway.start``, ``preflight``
and ``serve_cli`` do, after setting LiteLLM's offline switches.
"""

from __future__ import annotations

from . import offline  # noqa: F401  (offline switches before anyone imports LiteLLM)
from .script import REFERENCE_MODEL_NAMES, RunScript
from .server import Gateway


def preflight(models: list[str]) -> None:
    """Raise ClaimgridError (one line) if a real model lacks its key or is unreachable."""
    from .preflight import preflight as _preflight

    _preflight(models)


def serve_cli(argv: list[str] | None = None) -> int:
    """``grid.py gateway``: serve demo tokens for every reference model until Ctrl-C."""
    from .cli import serve_cli as _serve_cli

    return _serve_cli(argv)


__all__ = ["Gateway", "RunScript", "REFERENCE_MODEL_NAMES", "preflight", "serve_cli"]
