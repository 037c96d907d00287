"""How many nodes one driver keeps busy: ``uv run bench/ingest.py``.

On the Ray backend every node runs its own gateway and verifier; what all of them share is
the driver, the ledger's single writer. Three figures, each through the real code:

1. **runs/s of one node of this machine's size**: a small ``plain`` grid through
   ``grid.py run`` (local backend, every core of this machine), timed from its first
   stored run to its last (start-up excluded: a cluster's nodes start once);
2. **the single writer's ingest rate**: records with their evidence per second through a
   real ``RunStore`` (evidence folder with its manifest, then the ``runs.jsonl`` line with
   its fsync) plus the driver's per-result work (the spend of the run's exchanges), fed
   by a synthetic node that hands over the measured grid's own results (its records and
   evidence files, read back) under new run ids as fast as it can, on a thread;
3. **the gateway's calls/s on one node**: a real gateway serving the reference model
   ``diligent``, called over loopback HTTP by ``--clients`` threads for ``--seconds``.

Then, from them: nodes one driver keeps busy = ingest rate / runs/s per node, and the
model calls per run (from the measured grid's exchanges) against the gateway's calls/s.

    uv run bench/ingest.py                   # defaults: 12-cell grid, 400 results, 4 clients, 5 s
    uv run bench/ingest.py --results 1000 --clients 8 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimgrid.store import EVENTS_NAME, LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder
from claimgrid.store.lines import read_events  # noqa: E402 - the store's bounded JSON-lines parser
from claimgrid.store.record import dump  # noqa: E402

GRID = [
    "--tasks",
    "fix-float-add,write-status",
    "--content",
    "clean,malicious",
    "--swap",
    "none",
    "--models",
    "diligent,reader,narrator",
]


def _venvs(folder: Path) -> Path:
    """A venvs.toml with only the dependency-free ``plain`` framework (the harness's cost)."""
    path = folder / "venvs.toml"
    path.write_text(
        f'[frameworks.plain]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{ROOT}/frameworks/plain/adapter.py"\n'
    )
    return path


def measure_grid(folder: Path, jobs: int) -> tuple[Path, float, int]:
    """(ledger, runs/s from first to last stored run, runs) of the small grid."""
    out = folder / "grid"
    cmd = [
        sys.executable,
        str(ROOT / "grid.py"),
        "run",
        "--venvs",
        str(_venvs(folder)),
        "--out",
        str(out),
        "--jobs",
        str(jobs),
        "--no-progress",
        *GRID,
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ledger = LedgerFolder(out)
    seen: list[float] = []
    while proc.poll() is None:
        n = len(ledger.lines())  # absent: none; a torn last line (mid-append) is not a run yet
        seen += [time.monotonic()] * (n - len(seen))
        time.sleep(0.02)
    text = proc.stdout.read() if proc.stdout else ""
    if proc.returncode:
        raise SystemExit(f"the measured grid failed ({proc.returncode}):\n{text[-2000:]}")
    n = len(ledger.lines())
    seen += [time.monotonic()] * (n - len(seen))
    rate = (n - 1) / max(seen[-1] - seen[0], 1e-9) if n > 1 else 0.0
    return out, rate, n


def _evidence(folder: Path) -> dict:
    """A run's evidence files as the node hands them over (JSONL as lists, JSON as objects)."""
    from claimgrid.store import DERIVED_FILES

    files: dict = {}
    for path in sorted(folder.iterdir()):
        if path.name == "manifest.json" or path.name in DERIVED_FILES:
            continue
        if path.suffix == ".jsonl":
            files[path.name] = read_events(path)
        elif path.suffix == ".json":
            files[path.name] = json.loads(path.read_text())
        else:
            files[path.name] = path.read_bytes()
    return files


def measure_ingest(ledger: Path, results: int, folder: Path) -> dict:
    """Results/s through the real store and the driver's per-result spend, fed by a thread."""
    from claimgrid.gateway.budget import Spend
    from claimgrid.store import RunStore

    samples = [(dump(r), _evidence(ledger / "runs" / r.run_id)) for r in LedgerFolder(ledger).runs()]
    store = RunStore(folder / "ingest")
    store.create({"bench": "ingest"})
    spend = Spend()
    handover: queue.Queue = queue.Queue(maxsize=64)

    def synthetic_node() -> None:  # as fast as it can: a copy of a real result under a new id
        for i in range(results):
            record, files = samples[i % len(samples)]
            record = {**json.loads(json.dumps(record)), "run_id": f"{record['run_id']}-{i}"}
            record.pop("evidence_sha256", None)
            handover.put((record, files))
        handover.put(None)

    feeder = threading.Thread(target=synthetic_node, daemon=True)
    cpu0, t0 = time.process_time(), time.perf_counter()
    feeder.start()
    stored, size = 0, 0
    while (item := handover.get()) is not None:
        record, files = item
        store.write_evidence(record["run_id"], files)  # evidence first, as the engine does
        store.append(record)
        spend.add_events(files.get(EVENTS_NAME) or [])
        stored += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    for p in (folder / "ingest" / "runs").iterdir():
        size += sum(f.stat().st_size for f in p.iterdir())
    return {
        "results": stored,
        "wall_s": wall,
        "rate": stored / wall,
        "cpu_per_result_ms": cpu * 1000 / stored,
        "evidence_kb": size / 1024 / max(stored, 1),
    }


def measure_gateway(clients: int, seconds: float) -> dict:
    """Calls/s of one real gateway serving ``diligent`` to ``clients`` loopback threads."""
    import httpx

    import claimgrid.gateway.offline  # noqa: F401 - before any LiteLLM import: no cost-map download
    from claimgrid.gateway.server import Gateway
    from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
    from claimgrid.inputs.tasks import load_tasks
    from claimgrid.reference.script import CallLimits, RunScript

    task = load_tasks()["fix-float-add"]
    content, swap = load_content_conditions()["clean"], load_swap_conditions()["none"]
    gw = Gateway()
    url = gw.start()
    counts = [0] * clients
    stop = time.monotonic() + seconds
    messages = [{"role": "user", "content": task.spec.prompt}]

    def client(i: int) -> None:
        token = f"bench-{i}-{os.getpid()}"
        gw.register(
            token,
            RunScript.for_cell(
                token, task, content, swap, "diligent", "reader", "builder", limits=CallLimits(max_model_calls=10**9)
            ),
        )
        with httpx.Client(base_url=url, timeout=30) as http:
            while time.monotonic() < stop:  # bounded in time: stops by itself
                r = http.post(
                    "/chat/completions",
                    json={"model": "diligent", "messages": messages},
                    headers={"Authorization": f"Bearer {token}"},
                )
                r.raise_for_status()
                counts[i] += 1
        gw.finish(token)

    cpu0 = gw.thread_cpu_s()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu1 = gw.thread_cpu_s()
    gw.stop()
    calls = sum(counts)
    cpu = (cpu1 - cpu0) * 1000 / calls if cpu0 is not None and cpu1 is not None and calls else None
    return {"calls": calls, "rate": calls / wall, "cpu_per_call_ms": cpu}


def calls_per_run(ledger: Path) -> float:
    """Model calls per run of the measured grid (its gateway exchange events)."""
    folder = LedgerFolder(ledger)
    runs = folder.runs()
    calls = 0
    for r in runs:
        events = folder.event_dicts(r.run_id)
        calls += sum(1 for e in events if e.get("source") == "gateway" and e.get("kind") == "exchange")
    return calls / max(len(runs), 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench/ingest.py")
    parser.add_argument("--results", type=int, default=400, help="results the synthetic node hands over (400)")
    parser.add_argument("--clients", type=int, default=4, help="gateway client threads (4)")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the gateway is called (5 s)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="the measured grid's --jobs")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="cg-bench-ingest-"))
    try:
        ledger, node_rate, runs = measure_grid(folder, args.jobs)
        per_run = calls_per_run(ledger)
        ingest = measure_ingest(ledger, args.results, folder)
        gateway = measure_gateway(args.clients, args.seconds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"node: {runs}-run plain grid, --jobs {args.jobs} on {os.cpu_count()} cores: "
        f"{node_rate:.2f} runs/s (first to last stored run), {per_run:.1f} model calls per run"
    )
    print(
        f"driver: single writer ingests {ingest['rate']:.0f} results/s ({ingest['results']} results in "
        f"{ingest['wall_s']:.2f} s, {ingest['cpu_per_result_ms']:.2f} ms CPU each, "
        f"{ingest['evidence_kb']:.0f} KB evidence each, fsync per line)"
    )
    cpu = f", {gateway['cpu_per_call_ms']:.2f} ms gateway CPU each" if gateway["cpu_per_call_ms"] is not None else ""
    print(
        f"gateway: {gateway['rate']:.0f} calls/s on one node ({gateway['calls']} calls, "
        f"{args.clients} clients, {args.seconds:.0f} s{cpu}); a node at {node_rate:.2f} runs/s asks "
        f"{node_rate * per_run:.0f} calls/s ({node_rate * per_run / max(gateway['rate'], 1e-9):.0%} of it)"
    )
    nodes = ingest["rate"] / max(node_rate, 1e-9)
    print(
        f"one driver keeps {nodes:.0f} nodes of this machine's size busy "
        f"(ingest {ingest['rate']:.0f} results/s / {node_rate:.2f} runs/s per node)"
    )
    from _figures import record  # bench/, the script's own folder

    record(
        "ingest.py",
        {
            "the single writer's ingest": f"{ingest['rate']:.0f} results/s: {nodes:.0f} nodes of this machine's size "
            f"({node_rate:.2f} runs/s each)",
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
