"""The Ray backend on a real two-node Ray cluster on this machine (loopback only; one node of
one CPU, one of two): each node's admission gate and warm-parent preloads sized by its own
CPUs, one verify cache shared by both nodes (every distinct test runs once, as on the local
backend), a grid spread over both nodes, one node killed with ``kill -9`` mid-grid (every
process of it, its watchdog included: its work folder is removed by the driver's sweep),
``--resume`` completes it with no run lost or duplicated, and every classification equals
the local backend's (the same cells of the session's default-matrix grid, tests/conftest.py
``default_grid``, run by the local backend on the same ``plain`` framework).

Uses the dependency-free ``plain`` framework so the cost is Ray's, not a framework's.
"""

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from claimgrid.execute.admission import default_max_inflight
from claimgrid.execute.node import OWNER_FILE, WORK_PREFIX
from claimgrid.launch.kill import tree_members
from claimgrid.store.lines import read_runs

from tests import extras
from tests.conftest import ROOT, select_runs

ray = extras.need("ray", "ray")
from ray.cluster_utils import Cluster  # noqa: E402

CELLS = [
    "--tasks",
    "fix-float-add,write-status,review-change,nothing-to-fix",
    "--content",
    "clean,malicious",
    "--swap",
    "none",
    "--models",
    "diligent,reader,narrator",
]
N_CELLS = 4 * 2 * 3
# The tasks of CELLS whose verifier runs a test command (the others have nothing to cache).
TESTED_CELLS = ["--tasks", "fix-float-add,nothing-to-fix", *CELLS[2:]]
HEAD_CPUS, WORKER_CPUS = 1, 2  # Ray's CPU resource of each node: what its gate is sized by

# A loopback-only cluster: Ray otherwise advertises the machine's routable address.
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    # a busy 2-core machine starts raylets and their agents slowly (measured: a raylet
    # gave up waiting for its metrics agent's port under a load average of 14)
    "RAY_raylet_start_wait_time_s": "180",
    "RAY_agent_register_timeout_ms": "180000",
    # ... and its control store marks a node dead after 5 missed 3 s health checks (Ray's
    # default): a starved raylet was dropped between two tests at a load average of 8-10
    # (the next grid saw one node). About a minute of misses, for this test cluster.
    "RAY_health_check_failure_threshold": "20",
    "RAY_health_check_timeout_ms": "30000",
}


@pytest.fixture(scope="module")
def cluster():
    # Ray's session folder: short (its AF_UNIX socket paths, e.g. <dir>/ray/session_<time>_<pid>/
    # sockets/plasma_store.1, must stay under 108 bytes: pytest's basetemp is too deep) and
    # this test's own, removed after (not the machine-wide /tmp/ray).
    ray_tmp = tempfile.mkdtemp(prefix="cg-ray-", dir="/tmp")
    # The nodes' own temporary folder (their work folders), inherited by every Ray worker:
    # this cluster's alone, so a test sees exactly what its nodes leave behind.
    work = os.path.join(ray_tmp, "work")
    os.mkdir(work)
    env = {**RAY_ENV, "RAY_TMPDIR": ray_tmp, "TMPDIR": work}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    # Ray waits a fixed 30 s for a starting node to register; on a loaded 2-core machine that
    # can run out (measured here under a load average of 16), so the cluster gets three tries.
    # The head's own start fails the same way, so it is inside the tries, and a cluster that
    # never starts still leaves the environment and its folder as they were.
    c = None
    try:
        for attempt in range(3):
            try:
                c = Cluster(initialize_head=True, head_node_args={"num_cpus": HEAD_CPUS, "include_dashboard": False})
                worker = c.add_node(num_cpus=WORKER_CPUS)
                c.wait_for_nodes()
                break
            except Exception:  # noqa: BLE001 - a node that did not start in time: start again
                if c is not None:
                    c.shutdown()
                c = None
                if attempt == 2:
                    raise
        yield c, worker, work
    finally:
        if c is not None:
            c.shutdown()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _grid(*args):
    return subprocess.Popen(
        [sys.executable, str(ROOT / "grid.py"), *args, "--no-progress"],
        cwd=ROOT,
        env={**os.environ, **RAY_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _records(folder):
    return read_runs(folder / "runs.jsonl").values  # absent: none


def _work_folders(work) -> dict[str, int]:
    """The nodes' work folders in ``work``, each with the pid its owner file names."""
    out = {}
    for name in os.listdir(work):
        if name.startswith(WORK_PREFIX):
            try:
                out[os.path.join(work, name)] = int(open(os.path.join(work, name, OWNER_FILE)).read().split()[1])
            except (OSError, IndexError, ValueError):
                out[os.path.join(work, name)] = -1  # being made or removed
    return out


def _kill_9(node) -> set[int]:
    """Every process of a Ray node at once, as a machine that dies takes them: its raylet and
    all its descendants (the actor, its watchdog, warm parents, runs). Stopped first, so no
    process sees another die before it dies itself (the watchdog would clean up)."""
    members = tree_members(node.all_processes["raylet"][0].process.pid)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in members:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    return members


def test_ray_nodes_admit_by_their_cpus_and_share_one_verify_cache(tmp_path, plain_venvs, default_grid, cluster):
    """No --jobs: each node's gate and preloads are sized by its own CPUs; every distinct
    workspace is tested once on the whole cluster (the local backend's count) with hits
    across nodes; classifications equal the local backend's; no work folder is left."""
    c, _, work = cluster
    local = select_runs(default_grid, TESTED_CELLS)
    out = tmp_path / "parity"
    proc = _grid(
        "run", "--backend", "ray", "--address", c.address, "--venvs", str(plain_venvs), "--out", str(out), *TESTED_CELLS
    )
    text, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, text
    runs = _records(out)
    assert len(runs) == len(local) == 2 * 2 * 3
    assert {r["run_id"]: r["classification"] for r in runs} == {r["run_id"]: r["classification"] for r in local}

    hosts = json.loads((out / "meta.json").read_text())["executions"][0]
    nodes = sorted(hosts["per_node"], key=lambda n: n["slots"])
    assert [n["slots"] for n in nodes] == sorted([HEAD_CPUS, WORKER_CPUS])
    for n in nodes:  # the local backend's gate and preload stagger, per node
        assert n["max_inflight"] == default_max_inflight(n["slots"])
        assert n["scheduler"]["jobs"] == n["slots"] == n["scheduler"]["prewarm_parallel"]
        assert n["scheduler"]["max_inflight"] == n["max_inflight"] >= n["scheduler"]["peak_inflight"] >= 1

    verified = [r for r in runs if r.get("verify_cache")]  # runs of a task with a test command
    assert verified and all(r["verify_cache"]["status"] in ("hit", "miss") for r in verified)
    tested = collections.Counter(r["verify_cache"]["key"] for r in verified if r["verify_cache"]["status"] == "miss")
    keys = {r["verify_cache"]["key"] for r in verified}
    # The same workspaces as on the local backend (the key holds no node's file times) ...
    assert keys == {r["verify_cache"]["key"] for r in local if r.get("verify_cache")}
    assert set(tested) == keys and set(tested.values()) == {1}, tested  # ... each tested exactly once
    assert hosts["verify_cache"] == {
        "shared": True,
        "keys": len(keys),
        "test_runs": len(keys),
        "hits": hosts["verify_cache"]["hits"],
    }
    # Where both nodes met one workspace, one tested it and the other used that result.
    node_of = {r["run_id"]: r["node"]["node_id"] for r in runs}
    nodes_of_key = collections.defaultdict(set)
    for r in verified:
        nodes_of_key[r["verify_cache"]["key"]].add(r["node"]["node_id"])
    for key in (k for k, seen in nodes_of_key.items() if len(seen) > 1):
        assert any(
            node_of[r["verify_cache"]["from_run"]] != r["node"]["node_id"]
            for r in verified
            if r["verify_cache"]["key"] == key and r["verify_cache"]["status"] == "hit"
        ), key
    assert _work_folders(work) == {}


def test_ray_honours_a_budget_and_max_inflight_across_nodes(tmp_path, plain_venvs, cluster):
    """The grid's token budget is the driver's: once the finished runs' exchanges reach it, no
    node is sent another cell; --max-inflight caps each node's slots."""
    c, _, _ = cluster
    c.wait_for_nodes()  # both nodes alive before the grid sizes its slots (raises if Ray lost one)
    out = tmp_path / "budget"
    proc = _grid(
        "run",
        "--backend",
        "ray",
        "--address",
        c.address,
        "--venvs",
        str(plain_venvs),
        "--out",
        str(out),
        "--max-inflight",
        "1",
        "--max-tokens",
        "1",
        *CELLS,
    )
    text, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, text
    meta = json.loads((out / "meta.json").read_text())
    stop = meta["stopped_at_budget"]
    assert stop["limit"] == "max_tokens" and stop["runs_not_started"] > 0, text
    done = _records(out)
    # one run per node may be in flight when the first exchange crosses the limit
    assert 1 <= len(done) <= 2 and stop["runs_done"] == len(done)
    assert len(done) + stop["runs_not_started"] == N_CELLS
    assert [n["slots"] for n in meta["executions"][0]["per_node"]] == [1, 1]
    assert meta["finished"] is None
    # each record names the node that built it, as the driver's Ray reported that node
    nodes = {(n["node_id"], n["address"]) for n in meta["executions"][0]["per_node"]}
    assert all(r["node"]["backend"] == "ray" and (r["node"]["node_id"], r["node"]["address"]) in nodes for r in done)


def test_an_unreachable_address_is_one_line_within_seconds(tmp_path, plain_venvs):
    out = tmp_path / "never"
    t0 = time.monotonic()
    proc = _grid(
        "run", "--backend", "ray", "--address", "127.0.0.1:9", "--venvs", str(plain_venvs), "--out", str(out), *CELLS
    )
    text, _ = proc.communicate(timeout=120)
    lines = [line for line in text.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "cannot reach a Ray cluster" in lines[0], text
    assert time.monotonic() - t0 < 60 and not out.exists()


def test_ray_two_nodes_kill_resume_matches_local(tmp_path, plain_venvs, default_grid, cluster):
    """Last in this module: the cluster has one node after it."""
    c, worker, work = cluster
    local = select_runs(default_grid, CELLS)
    assert len(local) == N_CELLS

    out = tmp_path / "ray"
    proc = _grid(
        "run",
        "--backend",
        "ray",
        "--address",
        c.address,
        "--venvs",
        str(plain_venvs),
        "--out",
        str(out),
        "--jobs",
        "2",
        *CELLS,
    )
    deadline = time.monotonic() + 300
    while len(_records(out)) < 4 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stdout.read()
    folders = _work_folders(work)
    assert len(folders) == 2, folders  # one per node, each locked by its actor
    # A node dies mid-grid: its in-flight runs are lost, the others go on.
    killed = _kill_9(worker)
    c.remove_node(worker, allow_graceful=False)  # the cluster's own bookkeeping (all already dead)
    dead = [f for f, pid in folders.items() if pid in killed]
    assert len(dead) == 1 and os.path.isdir(dead[0]), (folders, killed)  # its watchdog died with it
    text, _ = proc.communicate(timeout=600)
    first = _records(out)
    assert "ray: 2 nodes" in text, text
    assert 4 <= len(first) <= N_CELLS
    meta = json.loads((out / "meta.json").read_text())
    if len(first) < N_CELLS:  # the lost runs are said, the grid exits non-zero, and it is not finished
        assert proc.returncode == 3 and "lost with their node" in text, text
        assert f"--resume {out} --backend ray --address {c.address}" in text, text  # the resume keeps the backend
        assert meta["finished"] is None
    hosts = meta["executions"][0]
    assert hosts["backend"] == "ray" and hosts["nodes"] == 2
    # the killed node's folder is gone (the surviving node swept it), and so is every other
    assert hosts["swept"] == dead and _work_folders(work) == {}
    # Which node ran what: per-node slots and runs in meta.json, the node in every record.
    assert [n["slots"] for n in hosts["per_node"]] == [2, 2]
    assert sum(n["runs"] for n in hosts["per_node"]) == len(first)
    assert {r["node"]["node_id"] for r in first} <= {n["node_id"] for n in hosts["per_node"]}
    assert all(r["node"]["backend"] == "ray" for r in first)

    resumed = _grid(
        "run", "--resume", str(out), "--venvs", str(plain_venvs), "--backend", "ray", "--address", c.address
    )
    text, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, text
    after = _records(out)
    ids = [r["run_id"] for r in after]
    assert len(ids) == len(set(ids)) == N_CELLS, "a run was lost or duplicated"
    by_id = {r["run_id"]: r for r in first}
    for r in after:  # runs written before the node died are unchanged
        if r["run_id"] in by_id:
            assert r == by_id[r["run_id"]]

    local_cls = {r["run_id"]: r["classification"] for r in local}
    assert {r["run_id"]: r["classification"] for r in after} == local_cls
    assert json.loads((out / "meta.json").read_text())["finished"] is not None
    assert _work_folders(work) == {}
