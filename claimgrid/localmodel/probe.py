"""What a running OpenAI-compatible model server says about itself, read over HTTP.

Every fact here comes from the server's own endpoints, whichever answer: llama.cpp's
``llama-server`` (``/props``: build, chat template, context per slot, slots, sampling
defaults; ``/apply-template``), Ollama (``/api/version``, ``/api/show``), vLLM (``/version``)
and any server's ``/v1/models``. A fact no endpoint gave is ``None`` and its field is named
in ``unknown``: nothing is guessed. :func:`warm_up` measures the speed with one chat
completion: the server's own ``timings`` (llama-server) or, where it gives none, the call's
wall time for both phases (slower figures, so a longer deadline, never a shorter one).
"""

from __future__ import annotations

import hashlib
import time

import httpx

from claimgrid.caps import LOCAL_MODEL_WARMUP_OUTPUT_TOKENS, LOCAL_MODEL_WARMUP_PROMPT_TOKENS
from claimgrid.errors import ClaimgridError

READ_TIMEOUT_S = 30.0
# A fixed conversation rendered with the template at start (llama-server's /apply-template):
# its sha256 pins what the template does to messages.
PROBE = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": "A"},
    {"role": "user", "content": "V"},
]
WARMUP_TEXT = (
    "The harness records every exchange between the agent and its model, runs the tests "
    "itself and compares what the agent claims with what it observed. "
)


def _sha(text: str | None) -> str | None:
    return hashlib.sha256(text.encode()).hexdigest() if isinstance(text, str) else None


class Server:
    """One server's root URL (no ``/v1``) and its key (a bearer token; "" for none)."""

    def __init__(self, root: str, key: str = ""):
        self.root = root.rstrip("/")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def get(self, path: str) -> dict | None:
        """The JSON object ``path`` answers with, or None (not there, refused, not JSON)."""
        return self._json("GET", path, None)

    def post(self, path: str, body: dict, timeout: float = READ_TIMEOUT_S) -> dict | None:
        return self._json("POST", path, body, timeout)

    def _json(self, method: str, path: str, body: dict | None, timeout: float = READ_TIMEOUT_S) -> dict | None:
        try:
            r = httpx.request(method, self.root + path, json=body, headers=self.headers, timeout=timeout)
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        try:
            data = r.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def model_ids(self) -> list[str] | None:
        """The ids ``/v1/models`` lists (None: it did not answer)."""
        data = self.get("/v1/models")
        if data is None or not isinstance(data.get("data"), list):
            return None
        return [str(m.get("id")) for m in data["data"] if isinstance(m, dict) and m.get("id")]


def engine(server: Server, model_id: str) -> dict:
    """The server's engine, template, context and sampling defaults, as its endpoints give them."""
    facts: dict = {
        "engine": {"name": None, "version": None, "llama_cpp_commit": None},
        "weights": {"file": None, "sha256": None, "bytes": None},
        "template": {"name": None, "sha256": None, "probe_sha256": None},
        "context": None,
        "kv_slots": None,
        "sampling": None,
    }
    props = server.get("/props")
    if props is not None and "build_info" in props:  # llama-server
        build = str(props["build_info"])  # "b<build number>-<commit>"
        commit = build.split("-", 1)[1] if "-" in build else None
        facts["engine"] = {
            "name": "llama-server",
            "version": build,
            "llama_cpp_commit": None if commit in (None, "unknown") else commit,
        }
        path = str(props.get("model_path") or "")
        facts["weights"]["file"] = path.rsplit("/", 1)[-1] or None
        facts["template"]["sha256"] = _sha(props.get("chat_template"))
        rendered = server.post("/apply-template", {"messages": PROBE})
        facts["template"]["probe_sha256"] = _sha((rendered or {}).get("prompt"))
        settings = props.get("default_generation_settings") or {}
        facts["context"] = settings.get("n_ctx")
        facts["kv_slots"] = props.get("total_slots")
        params = settings.get("params") or {}
        keys = ("top_k", "top_p", "min_p", "repeat_penalty", "temperature", "seed")
        facts["sampling"] = {k: params[k] for k in keys if k in params} or None
        return facts
    version = server.get("/api/version")
    if version is not None and "version" in version:  # Ollama
        facts["engine"].update(name="ollama", version=str(version["version"]))
        show = server.post("/api/show", {"model": model_id}) or {}
        facts["template"]["sha256"] = _sha(show.get("template"))
        info = show.get("model_info") or {}
        facts["context"] = next((v for k, v in info.items() if k.endswith(".context_length")), None)
        return facts
    version = server.get("/version")
    if version is not None and "version" in version:  # vLLM
        facts["engine"].update(name="vllm", version=str(version["version"]))
    return facts


def unknown(facts: dict) -> list[str]:
    """The dotted names of the facts no endpoint gave."""
    out = []
    for k, v in facts.items():
        if isinstance(v, dict) and k not in ("speed", "deadline"):
            out += [f"{k}.{kk}" for kk, vv in v.items() if vv is None]
        elif v is None:
            out.append(k)
    return out


def warm_up(server: Server, model_id: str, temperature: float | None, seed: int | None) -> dict:
    """Prompt and generation speed (tokens/s) from one chat completion of a fixed text
    (about ``LOCAL_MODEL_WARMUP_PROMPT_TOKENS`` in, ``LOCAL_MODEL_WARMUP_OUTPUT_TOKENS`` out,
    the end-of-text token ignored where the server allows; its prompt cache not used)."""
    body = {
        "model": model_id,
        "messages": [{"role": "user", "content": WARMUP_TEXT * max(1, LOCAL_MODEL_WARMUP_PROMPT_TOKENS // 28)}],
        "max_tokens": LOCAL_MODEL_WARMUP_OUTPUT_TOKENS,
        "ignore_eos": True,
        "cache_prompt": False,
        **({"temperature": temperature} if temperature is not None else {}),
        **({"seed": seed} if seed is not None else {}),
    }
    t0 = time.perf_counter()
    resp = server.post("/v1/chat/completions", body, timeout=600.0)
    wall = time.perf_counter() - t0
    if resp is None or not isinstance(resp.get("usage"), dict):
        raise ClaimgridError(f"{server.root}/v1/chat/completions: no completion with usage for model '{model_id}'")
    usage, timings = resp["usage"], resp.get("timings") or {}
    if timings.get("prompt_per_second") and timings.get("predicted_per_second"):
        return {
            "prompt_tokens": int(timings.get("prompt_n") or usage.get("prompt_tokens") or 0),
            "prompt_tokens_per_s": round(float(timings["prompt_per_second"]), 1),
            "output_tokens": int(timings.get("predicted_n") or usage.get("completion_tokens") or 0),
            "generation_tokens_per_s": round(float(timings["predicted_per_second"]), 1),
            "measured_by": "the server's timings",
        }
    p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return {
        "prompt_tokens": p,
        "prompt_tokens_per_s": round(p / max(wall, 1e-6), 1),
        "output_tokens": c,
        "generation_tokens_per_s": round(c / max(wall, 1e-6), 1),
        "measured_by": "the call's wall time (the server gives no timings)",
    }
