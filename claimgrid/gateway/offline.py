"""LiteLLM's offline switches, set before LiteLLM is first imported.

Every gateway module that imports LiteLLM imports this module first. With these set,
importing LiteLLM and serving reference models opens no socket beyond 127.0.0.1
(tests/integration/gateway/test_gateway_offline.py checks this): the model cost map is the bundled copy,
and catalogs/tokenizers LiteLLM would otherwise fetch on its own are skipped.
"""

from __future__ import annotations

import os

OFFLINE_ENV = {
    # The bundled model cost map instead of a download from GitHub at import time.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    # LiteLLM 1.110: any catalog, check or tokenizer it would fetch by itself is skipped.
    # (Its telemetry lives in the proxy server, which the gateway does not use.)
    "LITELLM_OFFLINE_MODE": "true",
}


def apply() -> None:
    """Force the offline switches into this process's environment (idempotent)."""
    os.environ.update(OFFLINE_ENV)


apply()
