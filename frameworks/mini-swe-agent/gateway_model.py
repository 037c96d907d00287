"""mini-swe-agent's ``mini`` program with its own ``OpenRouterModel`` client pointed at the gateway.

    python -c "$(cat gateway_model.py)" [mini's own options...]

The adapter passes this file's text as ``python -c`` (frameworks/mini-swe-agent/adapter.py): it
runs inside the agent sandbox, where neither this folder nor the harness is bound, so it imports
only the venv's packages. It registers :class:`GatewayModel` under the module name
``MODULE`` and runs ``minisweagent.run.mini`` as ``__main__`` with the remaining arguments; the
adapter selects the class with mini's own ``--model-class MODULE.GatewayModel``.

Why: mini-swe-agent's default ``LitellmModel`` imports LiteLLM, about 5 CPU-seconds and 2,700
modules in every run's fresh process (bench/README.md, "Coding agents"). Its own
``OpenRouterModel`` speaks the same Chat Completions dialect with ``requests`` (one POST per
attempt, no client retries; mini's tenacity retry around it, held to one attempt by
``MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT``), the same ``bash`` tool, tool-call parsing,
observation and format-error templates, and puts the response JSON in the trajectory as
``LitellmModel`` does. Its address (OpenRouter's), its key (``OPENROUTER_API_KEY``) and its
per-call deadline (60 s) are fixed in its code; :class:`GatewayModel` changes only these three:

* ``gateway_url`` (model config): the gateway's Chat Completions endpoint is
  ``<gateway_url>/chat/completions``;
* the key is ``OPENAI_API_KEY`` from the agent's environment (the run's credential, as
  LitellmModel read it; its commands get it blanked by ``environment.env``);
* ``call_timeout_s`` (model config): the run's per-call deadline, given to every request
  (``requests``' timeout bounds the connection and each wait for data; the gateway sends a
  non-streamed answer whole, so it is the wait for the answer).

* ``model_kwargs`` (merged into the request body by OpenRouterModel) lose mini.yaml's
  ``drop_params``, an instruction to LiteLLM, not a request field.

What differs on the wire from LitellmModel: the request body carries OpenRouterModel's
``"usage": {"include": true}``; the rest (model, messages, the ``bash`` tool) is the same.
"""

from __future__ import annotations

import os
import runpy
import sys

import requests
from minisweagent.models import openrouter_model

MODULE = "claimgrid_mini_gateway"
LITELLM_ONLY = ("drop_params",)  # model_kwargs LiteLLM reads itself (mini.yaml sets it)


class _Deadline:
    """``requests`` as OpenRouterModel's module sees it, every ``post`` under ``timeout_s``
    (its code passes a fixed 60 s)."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s

    def post(self, *args, **kwargs):
        kwargs["timeout"] = self.timeout_s
        return requests.post(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(requests, name)


class GatewayModel(openrouter_model.OpenRouterModel):
    """OpenRouterModel at the run's gateway, with the run's key and per-call deadline."""

    def __init__(self, *, gateway_url: str, call_timeout_s: float, **kwargs):
        model_kwargs = {k: v for k, v in (kwargs.pop("model_kwargs", None) or {}).items() if k not in LITELLM_ONLY}
        super().__init__(model_kwargs=model_kwargs, **kwargs)
        self._api_url = gateway_url.rstrip("/") + "/chat/completions"
        self._api_key = os.environ.get("OPENAI_API_KEY", "")
        openrouter_model.requests = _Deadline(float(call_timeout_s))  # type: ignore[assignment]

    def serialize(self) -> dict:
        out = super().serialize()
        out["info"]["config"]["model_type"] = f"{MODULE}.GatewayModel (minisweagent OpenRouterModel)"
        return out


def main() -> None:
    sys.modules[MODULE] = sys.modules[__name__]
    runpy.run_module("minisweagent.run.mini", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
