"""The driver's side of a local model: start its server process, wait for it, stop it.

:func:`start` runs ``python -m claimgrid.localmodel.model_server`` (never in the driver process)
in its own session, with a pipe on its stdin that only the driver holds. The pipe's first
line is the server's key (fresh per server, :attr:`Served.api_key`): the server answers only
requests that carry it, and only the gateway's deployment of the model holds it
(claimgrid.gateway.providers.register_local), so a run's agent on the same loopback (its
commands unguarded, ``--guard off``) cannot call the model behind the gateway's back. The
server exits on that pipe's EOF, so however the driver ends (normal end, error, Ctrl-C, SIGTERM, or
SIGKILL, when the kernel closes the pipe) the server ends too, and ``PR_SET_PDEATHSIG``
kills it as well when the driver dies. :meth:`Served.stop` closes the pipe, waits, kills.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from claimgrid import ROOT
from claimgrid.caps import LOCAL_MODEL_DEADLINE_SAFETY, LOCAL_MODEL_START_TIMEOUT_S
from claimgrid.errors import ClaimgridError
from claimgrid.localmodel.catalog import LocalModel

STOP_WAIT_S = 5.0


@dataclass
class Served:
    """One running local model server and what the grid records of it."""

    model: str  # "local/<name>", as --models names it
    entry: LocalModel
    port: int
    provenance: dict
    proc: subprocess.Popen
    log_path: Path
    jobs: int = 1
    deadline: dict = field(default_factory=dict)
    # The server's key (module docstring): for the gateway's deployment only, never recorded.
    api_key: str = field(default="", repr=False)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def facts(self) -> dict:
        """meta.json's ``local_models[<model>]``: provenance, speed, deadline, output cap."""
        return {**self.provenance, "deadline": self.deadline, "output_token_cap": self.entry.max_output_tokens}

    def stop(self) -> None:
        """Close the lifeline (the server exits on EOF), then kill it if it has not (idempotent)."""
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stdin):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        try:
            self.log_path.unlink()
        except OSError:
            pass


def call_deadline(speed: dict, entry: LocalModel, jobs: int) -> dict:
    """The per-call deadline from the measured speed: a worst call (a prompt filling the
    context less the output cap, then the output cap generated) at the warm-up's speeds,
    times the runs that can wait at the one server at once (``jobs``: the grid's runs in
    flight, ``--max-inflight``; the gateway's deadline counts a call's wait behind the others),
    times ``LOCAL_MODEL_DEADLINE_SAFETY`` (claimgrid.caps). Not capped: a queue the deadline
    left out would end calls that were only waiting their turn (the banner says when the
    deadline exceeds a run's timeout)."""
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


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def start(model: str, name: str, entry: LocalModel, catalog: Path, jobs: int, cache: Path | None = None) -> Served:
    """Start the server for ``entry`` and wait until it is ready (bounded: one line when not)."""
    cache = cache or ROOT / ".localmodel"
    cache.mkdir(parents=True, exist_ok=True)
    config = {
        "name": name,
        "entry": entry.model_dump(mode="json"),
        "catalog": str(catalog),
        "cache": str(cache),
        "parent_pid": os.getpid(),
    }
    fd, log = tempfile.mkstemp(prefix=f"server-{name}-", suffix=".log", dir=cache)
    with os.fdopen(fd, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claimgrid.localmodel.model_server", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,  # Ctrl-C reaches the driver, which stops the server in order
        )
    log_path = Path(log)
    assert proc.stdout is not None and proc.stdin is not None
    api_key = "cg-local-" + secrets.token_urlsafe(32)
    try:
        proc.stdin.write(api_key.encode() + b"\n")
        proc.stdin.flush()
    except OSError:
        pass  # the server already exited: the wait below reports how

    deadline = time.monotonic() + LOCAL_MODEL_START_TIMEOUT_S
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
        chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
        if not chunk:
            served = Served(model, entry, 0, {}, proc, log_path)
            served.stop() if proc.poll() is None else None
            why = (
                f"not ready after {LOCAL_MODEL_START_TIMEOUT_S:g} s"
                if not ready
                else f"exited with status {proc.wait()}"
            )
            raise ClaimgridError(f"local model '{model}': the server {why}: {_tail(log_path) or 'no output'}")
        line += chunk
    msg = json.loads(line)
    if "error" in msg:
        Served(model, entry, 0, {}, proc, log_path).stop()
        raise ClaimgridError(f"local model '{model}': {msg['error']}")
    served = Served(model, entry, int(msg["port"]), msg["provenance"], proc, log_path, jobs, api_key=api_key)
    served.deadline = call_deadline(served.provenance["speed"], entry, jobs)
    return served
