"""Check real models before the grid starts: one clear line instead of 900 failed runs.

Reference model names always pass. For any other name: LiteLLM must know its provider,
the provider's keys must be in the environment, and the provider's server must accept a
TCP connection (a local Ollama/vLLM server at its api_base, or a hosted API's host).
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

from claimgrid.errors import ClaimgridError
from claimgrid.gateway import offline  # noqa: F401
from claimgrid.reference.script import REFERENCE_MODEL_NAMES

# Where a hosted provider's API lives when no api_base is configured.
HOSTED = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "groq": "https://api.groq.com",
    "mistral": "https://api.mistral.ai",
    "deepseek": "https://api.deepseek.com",
    "openrouter": "https://openrouter.ai",
    "together_ai": "https://api.together.xyz",
}
# Env vars LiteLLM reads for a provider's base URL.
BASE_ENV = {
    "ollama": "OLLAMA_API_BASE",
    "ollama_chat": "OLLAMA_API_BASE",
    "hosted_vllm": "HOSTED_VLLM_API_BASE",
    "openai": "OPENAI_API_BASE",
    "lm_studio": "LM_STUDIO_API_BASE",
    "llamafile": "LLAMAFILE_API_BASE",
}


def _reachable(url: str, timeout_s: float) -> str | None:
    """None if ``url``'s host accepts a TCP connection, else the reason."""
    parsed = urlparse(url)
    host = parsed.hostname
    if not host:
        return f"'{url}' is not a URL"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{host}:{port} is unreachable ({exc.strerror or exc})"


def check_model(model: str, timeout_s: float = 3.0) -> None:
    import litellm

    litellm.suppress_debug_info = True
    try:
        _, provider, _, api_base = litellm.get_llm_provider(model)
    except Exception:
        raise ClaimgridError(
            f"model '{model}': not a reference model ({', '.join(REFERENCE_MODEL_NAMES)}) and LiteLLM "
            "does not know its provider; write it as provider/model, e.g. openai/gpt-4o-mini"
        ) from None
    env = litellm.validate_environment(model=model)
    if not env.get("keys_in_environment", False):
        missing = ", ".join(env.get("missing_keys") or []) or "its API key"
        raise ClaimgridError(f"model '{model}': {missing} is not set in the environment")
    base = os.environ.get(BASE_ENV.get(provider, ""), "") or api_base or HOSTED.get(provider)
    if base:
        why = _reachable(base, timeout_s)
        if why:
            raise ClaimgridError(f"model '{model}': provider {provider} at {base}: {why}")


def preflight(models: list[str]) -> None:
    """Raise ClaimgridError (one line) for the first real model that cannot be served."""
    for model in dict.fromkeys(models):
        if model not in REFERENCE_MODEL_NAMES:  # a live view of the registry
            check_model(model)
