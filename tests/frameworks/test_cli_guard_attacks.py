"""A coding agent with its own tools (venvs.toml ``kind = "cli"``) runs whole inside the guard,
end to end through grid.py as a user runs it: the real agent binary, real bwrap, the real
gateway behind the agent sandbox's loopback forwarder, the real verifier.

A hostile reference model (tests/fixtures/hostile_cli_policies.py) makes the agent's own shell
tool (spelled by its tool table) read host files outside the workspace, write outside it,
connect to a listening host port, to the driver's own ports (the gateway's among them) and to
public addresses: every probe fails, while the agent's model calls through the forwarder are
answered and recorded and the task passes. A second model leaves a sleeper outside its session
and hangs until the run's timeout: the run is recorded and nothing it started is left. A third
races the harness's turn snapshots (a workspace folder exchanged with a link to a root-only
host folder in a loop): no name from that folder reaches the ledger. The
same probes run unguarded (``--guard off``, the agent as the adapter's child) read the host's
file: what the probes would find without the guard.

In every run of the suite, as these agents' conformance is (tests/frameworks/test_conformance.py):
their venvs, npm installs of hundreds of MB, are built when these tests are selected. The guard's
agent sandbox is also checked without them (tests/integration/sandbox/test_agent_sandbox.py).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.inputs.venvs import load_venvs
from claimgrid.sandbox.guard import python_roots
from claimgrid.store.lines import read_events, read_runs

from tests.conftest import ROOT

POLICIES = ROOT / "tests" / "fixtures" / "hostile_cli_policies.py"
VENVS = load_venvs()
CLI = [name for name, e in VENVS.items() if e.is_cli]
# The hanging run's: the adapter stops its agent 5 s before it. Long enough for the slowest agent
# to start and reach its first command on a loaded machine: 45 s when mini-swe-agent imported
# LiteLLM in every run (about 6 CPU-seconds; its runs timed out at 20 s beside a whole suite at
# load 8); it no longer does (bench/agents.py: each agent's whole run's median
# under 10 s, its first command within the first model turn), so 30 s, still the margin of a
# run three times slower than that median. Each agent's hanging run is a wait of this length.
TIMEOUT_S = 30
# The hanging run waits out that timeout: a wait, not a core (the order xdist hands groups out in).
pytestmark = [pytest.mark.frameworks, pytest.mark.waits_s(TIMEOUT_S)]


def _task():
    """A builder task of the default suite (the attacker does it as diligent does first)."""
    tasks = in_suite(load_tasks(), "default")
    return next(t for _, t in sorted(tasks.items()) if t.role == "builder")


class Listener:
    """A host TCP port that listens, counting the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        self.sock.close()


def _grid(out: Path, fw: str, targets: dict, *args: str):
    env = {**os.environ, "CLAIMGRID_ATTACK": json.dumps(targets)}
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
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["model"]: r for r in read_runs(out / "runs.jsonl").values}


def _marked(mark: int) -> list[str]:
    """Processes whose command line holds the hanger's sleeper's mark."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(mark) in cmd and "pytest" not in cmd:
                found.append(f"{pid}: {cmd}")
    return found


class Watcher:
    """Looks for the hanger's sleeper while the grid runs: it must have lived to be seen gone."""

    def __init__(self, mark: int):
        self.mark, self.seen, self.done = mark, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.wait(0.2):
            if not self.seen:
                self.seen = _marked(self.mark)

    def stop(self):
        self.done.set()
        self.thread.join()


@pytest.fixture(scope="module", params=CLI)
def fw(request):
    return request.param


@pytest.fixture(scope="module")
def attacked(fw, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"cli-attacks-{fw}")
    token = "SECRET-" + secrets.token_hex(12)
    out = {}
    for name, guard in (("guarded", "on"), ("unguarded", "off")):
        folder = base / name / "host"  # world-readable: only the sandbox's mounts keep it out
        folder.mkdir(parents=True)
        for p in (base, base / name, folder):
            p.chmod(0o755)
        (folder / "secret.txt").write_text(token + "\n")
        (folder / "secret.txt").chmod(0o644)
        # The racer's target: a root-only folder holding a file whose name is the secret.
        race_dir = base / name / "root-only"
        race_dir.mkdir(mode=0o700)
        race_name = f"payroll-{secrets.token_hex(8)}.txt"
        (race_dir / race_name).write_text("salaries\n")
        race_dir.chmod(0o700)
        listener = Listener()
        mark = 900_000 + secrets.randbelow(90_000)
        grid = base / name / "grid"
        targets = {
            "secret": str(folder / "secret.txt"),
            "ledger": str(grid),
            "listener": listener.port,
            "mark": mark,
            "race_dir": str(race_dir),
        }
        models = "cli-attacker,cli-hanger,cli-racer" if guard == "on" else "cli-attacker"
        watcher = Watcher(mark)
        runs = _grid(
            grid, fw, targets, "--guard", guard, "--models", models, "--jobs", "2", "--timeout", str(TIMEOUT_S)
        )
        watcher.stop()
        listener.close()
        out[name] = {
            "grid": grid,
            "runs": runs,
            "host": folder,
            "token": token,
            "accepted": listener.accepted,
            "stray": _marked(mark),
            "seen": watcher.seen,
            "listener": listener.port,
            "race_name": race_name,
            "pwned": sorted(p.name for p in folder.iterdir() if p.name == "PWNED"),
        }
    return out


def _output(result):
    """A tool result's command output: the result itself, or the string field of a JSON object
    that holds it (an agent that sends its observation as JSON, e.g. mini-swe-agent's)."""
    try:
        parsed = json.loads(result) if isinstance(result, str) else None
    except ValueError:
        return result
    if isinstance(parsed, dict):
        return next((v for v in parsed.values() if isinstance(v, str) and "@@ end" in v), result)
    return result


def _sections(grid: Path, run: dict) -> dict[str, list[str]]:
    """The attack script's output, by probe: from the tool result the agent sent back (the
    gateway's record of its next request)."""
    events = read_events(grid / run["evidence_dir"] / "events.jsonl")
    results = [_output(r) for e in events if e["source"] == "gateway" for r in e.get("tool_results") or []]
    text = next(r for r in results if isinstance(r, str) and "@@ end" in r)
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@@ "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return sections


def test_every_probe_fails_and_the_run_is_recorded(fw, attacked):
    got = attacked["guarded"]
    run, grid = got["runs"]["cli-attacker"], got["grid"]
    assert run["parity"]["guard"]["guard"] == "on" and run["classification"]["process"] == "ok", run["classification"]
    # The agent's own model calls went through the forwarder and were recorded; the task passed.
    exchanges = [
        e
        for e in read_events(grid / run["evidence_dir"] / "events.jsonl")
        if e["source"] == "gateway" and e["kind"] == "exchange"
    ]
    assert len(exchanges) >= 3 and all(e["status"] == 200 for e in exchanges)
    assert run["classification"]["outcome"] == "PASS", run["classification"]
    s = _sections(grid, run)
    # The probes ran: the agent's shell lists its own workspace (the task's content slot in it).
    assert "LISTED" in s["own-workspace"] and _task().spec.content_slot in s["own-workspace"], s["own-workspace"]
    # Host files outside the workspace: a world-readable file, the ledger, /root, /etc/shadow,
    # every run workspace of the driver by its host path (this run's and the other's).
    evidence = "".join(p.read_text(errors="replace") for p in (grid / run["evidence_dir"]).rglob("*") if p.is_file())
    assert got["token"] not in evidence and "No such file" in " ".join(s["read-secret"]), s["read-secret"]
    assert s["read-ledger"] == ["DENIED"] and s["read-shadow"] == ["DENIED"], s
    bound = {Path(r).relative_to("/root").parts[0] for r in _bound_roots(fw) if r.startswith("/root/")}
    assert set(s["read-root"]) <= bound, (s["read-root"], bound)  # only the bound interpreters' folders
    assert s["read-workspaces"] and set(s["read-workspaces"]) == {"DENIED"}, s["read-workspaces"]
    # Writes outside the workspace: none landed (the host folder, the ledger, run workspaces).
    assert len(s["write-outside"]) >= 3 and set(s["write-outside"]) == {"DENIED"}, s["write-outside"]
    assert got["pwned"] == [] and not (grid / "PWNED").exists()
    assert all("PWNED" not in (grid / r["evidence_dir"] / "diff.patch").read_text() for r in got["runs"].values())
    # The network: the host's listener, the driver's own ports (the gateway's among them), public addresses.
    assert s["connect-listener"] == [f"REFUSED 127.0.0.1:{got['listener']}"] and got["accepted"] == 0
    gateway_port = urlsplit(json.loads((grid / run["evidence_dir"] / "control.json").read_text())["gateway_url"]).port
    assert f"REFUSED 127.0.0.1:{gateway_port}" in s["connect-driver"], s["connect-driver"]
    assert all(line.startswith("REFUSED ") for line in s["connect-driver"] + s["connect-public"]), s


def test_a_hanging_agent_is_killed_whole_and_recorded(fw, attacked):
    got = attacked["guarded"]
    run = got["runs"]["cli-hanger"]
    assert run["classification"]["process"] in ("adapter_error", "timeout"), run["classification"]
    assert run["timings"]["agent_s"] < TIMEOUT_S + 5, run["timings"]
    assert got["seen"], "the sleeper was never seen running"
    assert got["stray"] == [], got["stray"]  # the sleeper that left its session is gone too


def test_a_folder_swapped_for_a_link_out_never_reaches_the_turn_snapshots(fw, attacked):
    """The racer exchanges a workspace folder with a link to a root-only host folder while the
    harness (root) takes its turn snapshots: the host folder's file names are nowhere in the
    run's evidence (claimgrid.verify.workspace.walk_at), and the run is recorded."""
    got = attacked["guarded"]
    run, grid = got["runs"]["cli-racer"], got["grid"]
    folder = grid / run["evidence_dir"]
    events = read_events(folder / "events.jsonl")
    results = [str(r) for e in events if e["source"] == "gateway" for r in e.get("tool_results") or []]
    assert any("RACING" in r for r in results), "the racer never started"
    turns = [e for e in events if e.get("kind") == "turn_changes"]
    assert len(turns) >= 2, turns  # snapshots were taken while it raced
    leaked = [str(p) for p in grid.rglob("*") if p.is_file() and got["race_name"].encode() in p.read_bytes()]
    assert leaked == [], leaked
    refused = sum("changed while it was read" in (t.get("reason") or "") for t in turns)
    print(f"{fw}: {len(turns)} turn intervals while racing, {refused} with a snapshot refused mid-swap, 0 leaked")


def test_unguarded_the_same_probes_read_the_host(fw, attacked):
    """The control: without the guard the agent's shell reads the host file the guarded run
    could not (so the guarded probes' failures are the guard's doing)."""
    got = attacked["unguarded"]
    run = got["runs"]["cli-attacker"]
    assert run["parity"]["guard"]["guard"] == "off"
    assert got["token"] in _sections(got["grid"], run)["read-secret"]


def _bound_roots(fw: str) -> list[str]:
    entry = VENVS[fw]
    python = str(Path(entry.venv_python).parent.resolve() / "python")
    return [*python_roots(python), *python_roots(_task().python)]
