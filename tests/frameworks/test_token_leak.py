"""The run token never reaches the agent or the ledger (issue 51 item 3). End to end through
grid.py as a user runs it: one small grid, one task, one cell per venvs.toml entry (every
coding agent of kind "cli", whole in the guard behind its loopback forwarder, and every
library framework), the real gateway and verifier; the model is ``token-seeker``
(tests/fixtures/hostile_cli_policies.py).

Each run's agent tries every way to its token from its own shell or the harness's tool layer
(the placeholder in the forwarder's request line, in other headers and in a body, request
smuggling by ambiguous framing, every environment, command line and file it can read) and
writes what it got, hex-encoded, into its workspace. Then its model (harness code, which
reads the run's token from the gateway's registry) has it write the token into the workspace
literally and hex-encoded, and print it. The test learns each run's token from that hex file
(the diff), and requires:

* what the agent extracted holds no token (it met the forwarder: the extractor's answers are
  the gateway's, for a coding agent);
* the literal token is nowhere in the whole ledger folder (every file, every run), and the
  redaction marker is where the token was written (diff, events, gateway exchanges).
"""

from __future__ import annotations

import binascii
import json
import re
import subprocess
import sys

import pytest

from claimgrid.execute.redact import REDACTED
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.inputs.venvs import load_venvs
from claimgrid.store.lines import read_runs

from tests.conftest import ROOT
from tests.fixtures.hostile_cli_policies import EXTRACTED, NO_TOKEN, TOKEN_FILE, TOKEN_HEX

# setup_s: the module's own grid (one run per venvs.toml entry) is its set-up: handed out early.
pytestmark = [pytest.mark.frameworks, pytest.mark.setup_s(100)]

POLICIES = ROOT / "tests" / "fixtures" / "hostile_cli_policies.py"
VENVS = load_venvs()
FRAMEWORKS = sorted(VENVS)  # every entry: the coding agents and the library frameworks
TIMEOUT_S = 120


def _task():
    """A builder task of the default suite (the seeker does it as diligent does first)."""
    tasks = in_suite(load_tasks(), "default")
    return next(t for _, t in sorted(tasks.items()) if t.role == "builder")


def _workspace_file(patch: str, name: str) -> str | None:
    """A new file's text in the workspace the verifier diffed (its added lines in diff.patch)."""
    m = re.search(rf"^\+\+\+ b/{re.escape(name)}\n(?:@@[^\n]*\n)?((?:\+[^\n]*\n?)*)", patch, re.M)
    return None if m is None else "".join(line[1:] + "\n" for line in m.group(1).splitlines())


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    out = tmp_path_factory.mktemp("token-leak") / "grid"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "grid.py"),
            "run",
            "--out",
            str(out),
            "--no-progress",
            "--policies",
            str(POLICIES),
            "--frameworks",
            ",".join(FRAMEWORKS),
            "--tasks",
            _task().id,
            "--content",
            "clean",
            "--swap",
            "none",
            "--models",
            "token-seeker",
            "--jobs",
            "2",
            "--timeout",
            str(TIMEOUT_S),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, {r["framework"]: r for r in read_runs(out / "runs.jsonl").values}


def test_every_framework_ran_the_seeker(grid):
    _, runs = grid
    assert sorted(runs) == FRAMEWORKS
    for fw, run in runs.items():
        assert run["model"] == "token-seeker" and run["classification"]["process"] == "ok", (fw, run["classification"])
        if VENVS[fw].is_cli:
            assert run["parity"]["guard"]["guard"] == "on", fw


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_the_token_reaches_neither_the_agent_nor_the_ledger(grid, fw):
    out, runs = grid
    evidence = out / runs[fw]["evidence_dir"]
    patch = (evidence / "diff.patch").read_text(errors="replace")
    hexed = (_workspace_file(patch, TOKEN_HEX) or "").strip()
    assert hexed, (fw, "the seeker never wrote its token")
    token = binascii.unhexlify(hexed).decode()
    assert token.startswith("cg-") and token != NO_TOKEN, token
    # What the agent got by every trick it tried: the forwarder's and the gateway's answers,
    # every environment and file it could read. None holds the token.
    extracted = _workspace_file(patch, EXTRACTED)
    assert extracted, (fw, "the extractor never ran")
    got = dict(json.loads(binascii.unhexlify(extracted.strip())))
    leaked = sorted(label for label, text in got.items() if token in text)
    assert leaked == [], (fw, leaked)
    assert "PATH" in got["environ"], sorted(got)[:20]
    if VENVS[fw].is_cli:
        # Through the forwarder: the token went into the credential header (the gateway took the
        # request as the run's: a 404, not a 401) and nowhere else; ambiguous framing went nowhere.
        assert "HTTP/1.1 404" in got["models-id"] and "model_not_found" in got["models-id"], got["models-id"]
        assert got["smuggle-te-cl"] == got["bare-lf"] == "", (got["smuggle-te-cl"], got["bare-lf"])
    # Where the model had the agent write and print it, the marker stands instead.
    assert REDACTED in (_workspace_file(patch, TOKEN_FILE) or ""), fw
    for name in ("events.jsonl", "gateway.jsonl"):
        assert REDACTED in (evidence / name).read_text(errors="replace"), (fw, name)
    found = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert found == [], (fw, found)
