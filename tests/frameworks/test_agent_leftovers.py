"""Nothing an agent leaves behind is trusted: its processes, the files the harness reads back,
the credential it was given. End to end through grid.py as a user runs it, with the real
agents (every venvs.toml entry of kind "cli") and one library framework (the first entry of
kind "python" outside the default matrix: the dependency-free one), real bwrap, the real
gateway and verifier; hostile reference models from tests/fixtures/hostile_cli_policies.py.

* **No process outlives the run.** ``cli-swap-*`` first leaves a detached, double-forked
  ``setsid`` watcher that stamps the time into a workspace file (and a world-writable folder of
  the test's, for an unguarded command that runs as nobody) every 10 ms for as long as it
  lives. The adapter's reaper (frameworks/_harness/reaper.py) records when it had every
  process of the run gone, before any read-back; the workspace the verifier diffed holds the
  watcher's last stamp: it is never later than that (guarded and unguarded).
* **Read-backs cannot be redirected.** For each entry whose adapter reads a file back from the
  agent's HOME (its ``READ_BACK``, read from the adapter's code), the watcher puts a symlink to
  a host-only, root-only file holding a fresh secret in its place (guarded), a FIFO (guarded),
  a hardlink to that file (unguarded: where the agent can see it). The secret appears nowhere in
  the ledger folder and the refusal is a recorded ``readback_refused`` event naming what was
  there (where the watcher could plant it; under the guard it always can).
* **No readable credential.** ``cli-env`` has each coding agent run ``env``,
  ``/proc/self/environ``, ``/proc/$PPID/environ`` and every ancestor's through its own shell
  tool (guarded): the output the agent sent back holds no run token (the forwarder alone has it,
  claimgrid/sandbox/loopback.py), and nowhere in the ledger is one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.inputs.venvs import load_venvs
from claimgrid.store.lines import read_events, read_runs

from tests.conftest import ROOT
from tests.fixtures.hostile_cli_policies import ENV_PROBE, PLANTED, WATCH_MARKER

pytestmark = pytest.mark.frameworks

POLICIES = ROOT / "tests" / "fixtures" / "hostile_cli_policies.py"
VENVS = load_venvs()
CLI = sorted(name for name, e in VENVS.items() if e.is_cli)
LIBRARY = sorted(name for name, e in VENVS.items() if not e.is_cli and not e.default)[:1]
TOKEN = re.compile(r"cg-[A-Za-z0-9_-]{32}")  # claimgrid.execute.runner: "cg-" + token_urlsafe(24)
TIMEOUT_S = 60


def read_back_names(fw: str) -> list[str]:
    """The adapter's ``READ_BACK`` (the files it reads back from the agent's HOME), from its code."""
    tree = ast.parse(Path(VENVS[fw].adapter).read_text())
    consts = {
        t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    node = consts.get("READ_BACK")
    if node is None:
        return []
    return [consts[e.id].value if isinstance(e, ast.Name) else e.value for e in node.elts]  # type: ignore[attr-defined]


def _task():
    """A builder task of the default suite (the attackers do it as diligent does)."""
    tasks = in_suite(load_tasks(), "default")
    return next(t for _, t in sorted(tasks.items()) if t.role == "builder")


def _grid(out: Path, fw: str, attack: dict, guard: str, models: list[str]) -> dict:
    env = {**os.environ, "CLAIMGRID_ATTACK": json.dumps(attack)}
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
            fw,
            "--tasks",
            _task().id,
            "--content",
            "clean",
            "--swap",
            "none",
            "--guard",
            guard,
            "--models",
            ",".join(models),
            "--jobs",
            str(len(models)),
            "--timeout",
            str(TIMEOUT_S),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["model"]: r for r in read_runs(out / "runs.jsonl").values}


@pytest.fixture(scope="module", params=CLI + LIBRARY)
def fw(request):
    return request.param


@pytest.fixture(scope="module")
def attacked(fw, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"leftovers-{fw}")
    secret = "HOSTSECRET-" + secrets.token_hex(16)
    vault = base / "vault"  # root-only: only a root read-back that follows a link reaches it
    vault.mkdir(mode=0o700)
    (vault / "secret.txt").write_text(secret + "\n")
    (vault / "secret.txt").chmod(0o600)
    names = read_back_names(fw)
    # The watcher's clock where an unguarded command (as nobody) can write: outside the test's
    # own 0700 folders.
    stamps = Path(tempfile.mkdtemp(prefix="claimgrid-stamps-", dir="/tmp"))
    stamps.chmod(0o1777)
    attack = {"secret": str(vault / "secret.txt"), "names": names, "stamps": str(stamps)}
    cli = VENVS[fw].is_cli
    guarded = ["cli-swap-symlink", *(["cli-swap-fifo"] if names else []), *(["cli-env"] if cli else [])]
    unguarded = ["cli-swap-hardlink" if names else "cli-swap-symlink"]
    grids = {"on": base / "guarded", "off": base / "unguarded"}
    try:
        runs = {
            "on": _grid(grids["on"], fw, attack, "on", guarded),
            "off": _grid(grids["off"], fw, attack, "off", unguarded),
        }
        yield {"grids": grids, "runs": runs, "secret": secret, "names": names, "vault": vault, "stamps": stamps}
    finally:
        shutil.rmtree(stamps, ignore_errors=True)


def _events(grid: Path, run: dict) -> list[dict]:
    return read_events(grid / run["evidence_dir"] / "events.jsonl")


def _workspace_file(grid: Path, run: dict, name: str) -> str | None:
    """A file's text in the workspace the verifier diffed (its added lines in diff.patch)."""
    patch = (grid / run["evidence_dir"] / "diff.patch").read_text(errors="replace")
    m = re.search(rf"^\+\+\+ b/{re.escape(name)}\n(?:@@[^\n]*\n)?((?:\+[^\n]*\n?)*)", patch, re.M)
    return None if m is None else "".join(line[1:] + "\n" for line in m.group(1).splitlines())


def _swap_runs(attacked):
    for guard, runs in attacked["runs"].items():
        for model, run in runs.items():
            if model.startswith("cli-swap-"):
                yield guard, model, run


def test_no_process_of_the_run_outlives_it(fw, attacked):
    for guard, model, run in _swap_runs(attacked):
        grid = attacked["grids"][guard]
        ended = [
            e
            for e in _events(grid, run)
            if e["source"] == "runtime" and e["kind"] in ("agent_processes", "run_processes")
        ]
        assert ended and all(e["left"] == 0 for e in ended), (guard, model, ended)
        first = min(e["ended_unix"] for e in ended)  # the first time every process was gone: before any read-back
        stamp = _workspace_file(grid, run, WATCH_MARKER)
        if stamp is None and guard == "off":  # its command ran as nobody, outside the workspace's owner
            path = attacked["stamps"] / model.removeprefix("cli-swap-")
            stamp = path.read_text() if path.exists() else None
        assert stamp is not None, (guard, model, "the watcher never ran")
        assert float(stamp.strip()) <= first, (guard, model, stamp, first)
        if guard == "off" and not VENVS[fw].is_cli:  # a library's command, unguarded: only the reaper got it
            assert any(e["killed"] >= 1 for e in ended), ended


def test_read_backs_are_never_redirected(fw, attacked):
    if not attacked["names"]:
        pytest.skip(f"{fw}'s adapter reads no file back from the agent (no READ_BACK)")
    for grid in attacked["grids"].values():
        leaked = [str(p) for p in grid.rglob("*") if p.is_file() and attacked["secret"].encode() in p.read_bytes()]
        assert leaked == [], leaked
    assert (attacked["vault"] / "secret.txt").stat().st_nlink >= 1
    for guard, model, run in _swap_runs(attacked):
        grid = attacked["grids"][guard]
        variant = model.removeprefix("cli-swap-")
        planted = (_workspace_file(grid, run, PLANTED) or "").split()
        if guard == "on":  # the agent's HOME is its own: the watcher always plants
            assert planted[:2] == [variant, attacked["names"][0]], (model, planted)
        refused = [e for e in _events(grid, run) if e["source"] == "runtime" and e["kind"] == "readback_refused"]
        if planted:
            assert refused, (guard, model, "planted but no refusal recorded")
            assert all(variant in e["reason"] and e["what"] and e["message"] for e in refused), refused
            assert run["classification"]["outcome"], run["classification"]  # classified from the rest


def test_no_credential_is_readable_from_the_agents_shell(fw, attacked):
    if not VENVS[fw].is_cli:
        pytest.skip("a library framework has no shell of its own: its commands get no credential (command_sandbox)")
    grid, run = attacked["grids"]["on"], attacked["runs"]["on"]["cli-env"]
    results = [
        r
        for e in _events(grid, run)
        if e["source"] == "gateway"
        for r in e.get("tool_results") or []
        if isinstance(r, str) and ENV_PROBE in r
    ]
    assert results, "the env probe's output never came back"
    out = results[0]
    assert "PATH=" in out and "@@ parent" in out and "@@ end" in out, out[:2000]
    assert TOKEN.search(out) is None, TOKEN.search(out)
    leaked = [str(p) for p in grid.rglob("*") if p.is_file() and TOKEN.search(p.read_text(errors="replace"))]
    assert leaked == [], leaked


def test_every_command_of_a_coding_agent_has_a_time_limit_recorded(fw, attacked):
    """The run's per-command limit (budgets.command_timeout_s) is what its agent was given, and
    the run records it and what enforces it (the sandbox's limited bash is tested on its own in
    tests/integration/sandbox/test_agent_sandbox.py)."""
    if not VENVS[fw].is_cli:
        pytest.skip("a library framework's commands are the harness tool layer's (command_sandbox timeout_s)")
    for guard, runs in attacked["runs"].items():
        grid = attacked["grids"][guard]
        for model, run in runs.items():
            ctl = json.loads((grid / run["evidence_dir"] / "control.json").read_text())
            limits = [e for e in _events(grid, run) if e["source"] == "runtime" and e["kind"] == "limits"]
            assert len(limits) == 1 and limits[0]["command_timeout_enforced_by"], (guard, model, limits)
            if guard == "on":
                assert limits[0]["command_timeout_s"] == ctl["budgets"]["command_timeout_s"], (limits, ctl["budgets"])
