"""The harness model gateway (docs/DESIGN.md, "The gateway"): one loopback endpoint speaking three API
dialects (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses), reference models answered by harness code, real models through one LiteLLM Router, the
four swap conditions, and a per-run log of every exchange (CONTRACTS: source ``gateway``).

Importing this package, starting a gateway and serving reference models do not import
LiteLLM (seconds of CPU; bench/README.md). It is imported, after LiteLLM's offline switches are set, only for a
real model: the gateway's first call to one, ``preflight`` of one, its price lookup.

Modules:

* ``answer`` - One model call's answer, and who has to give it;
* ``app`` - The gateway's ASGI app: model calls of registered runs, in three API dialects;
* ``budget`` - Running totals of a grid's model spend, kept by the gateway (``Gateway.spend``);
* ``cassette`` - The cassette: a run's ``gateway.jsonl`` as a complete, content-addressed record;
* ``connections`` - Per-provider connection limits: at most N calls in flight to one real provider;
* ``dialects`` - The API dialects the gateway serves, each translated to and from its internal chat
  form;
* ``dispatch`` - Who answers a model call: the harness's reference-model code, or the LiteLLM
  Router;
* ``exchanges`` - The gateway's evidence: one ``source: gateway`` exchange event per request
  (CONTRACTS);
* ``inbound`` - Inbound connections to the gateway: per-run caps, a pre-authentication pool,
  deadlines;
* ``native`` - Native pass-through: a client's own dialect sent verbatim to a provider that speaks
  it;
* ``offline`` - LiteLLM's offline switches, set before LiteLLM is first imported;
* ``preflight`` - Check real models before the grid starts: one clear line instead of 900 failed
  runs;
* ``pricing`` - Whether LiteLLM's bundled price map knows a model (so a cost is not invented);
* ``providers`` - The one LiteLLM Router of the gateway, and the custom provider behind reference
  models;
* ``recorded`` - The replay provider: serve a published run's recorded exchanges, in call order,
  offline;
* ``request`` - Validation of a chat-completions request body: anything malformed is a client error
  (400);
* ``retry`` - Provider retries: a real provider's transient failure is retried inside the gateway;
* ``runs`` - Registered runs: token -> script, call counter and the run's gateway log;
* ``safejson`` - The gateway's JSON responses, for any content a model or a client sent;
* ``scripted`` - Reference models answered by harness code: the policy's turn as an OpenAI chat
  completion, with the run's swap applied, exactly as the LiteLLM Router path answers it;
* ``server`` - Gateway: the harness model endpoint, served by uvicorn in a background thread;
* ``side_routes`` - The gateway's routes beside the model calls: the model list and Anthropic's
  token count;
* ``sse`` - OpenAI-style server-sent events for a completed chat completion;
* ``swap`` - Which swap the gateway applies on one call of a run (docs/DESIGN.md, "Conditions");
* ``upstream`` - One model call through the Router, with the run's swap applied.
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
