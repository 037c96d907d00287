"""``grid.py replay LEDGER_DIR``: re-execute every run of a published ledger, offline.

Each run is executed again for real (the same framework venv, adapter, tool layer,
verifier and classifier as ``grid.py run``), but the gateway answers every model call
from the run's cassette (claimgrid.gateway.recorded): no model, no API key, no network.
For every run it reports

* whether the framework sent the same requests: the request hash (``request_sha256``)
  of every call against the recorded one, and the first call that differs;
* whether the classification equals the published one (and which fields differ).

The replay is a new ledger folder (default ``ledger/<grid id>.replay-<time>``) with its
own runs, evidence and LEDGER.md, plus ``REPLAY.md`` and ``replay.json``; the published
folder is only read. Exit status 0 when every run matches on both counts, 1 otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

from claimgrid import ROOT
from claimgrid.errors import ClaimgridError
from claimgrid.execute.cells import Cell
from claimgrid.store import RunStore

CELL_FIELDS = ("framework", "task", "content", "swap", "model", "substitute", "repeat")


def _source(folder: Path) -> tuple[RunStore, dict, list[dict]]:
    store = RunStore(folder)
    if not store.meta_path.is_file():
        raise ClaimgridError(f"{folder}: not a grid folder (no meta.json)")
    if not store.runs_path.is_file():
        raise ClaimgridError(f"{folder}: not a grid folder (no runs.jsonl)")
    meta = store.read_meta()
    records = store.records()
    if not records:
        raise ClaimgridError(f"{store.runs_path}: no completed runs to replay")
    for r in records:
        missing = [k for k in CELL_FIELDS if k not in r]
        if missing:
            raise ClaimgridError(f"{store.runs_path}: run {r.get('run_id')!r}: field '{missing[0]}' is missing")
        cassette = store.runs_dir / r["run_id"] / "gateway.jsonl"
        if not cassette.is_file():
            raise ClaimgridError(f"{cassette}: missing: the run has no recorded model exchanges to replay")
    return store, meta, records


def compare_requests(recorded: list[dict], replayed: list[dict]) -> dict:
    """Request hashes call by call: ``{"match", "first_diff", "recorded_calls", "replayed_calls"}``;
    ``first_diff`` is the first call index whose hash differs or that exists on one side only."""
    a = [r["request_sha256"] for r in recorded]
    b = [r["request_sha256"] for r in replayed]
    first = next((i for i in range(max(len(a), len(b))) if i >= len(a) or i >= len(b) or a[i] != b[i]), None)
    return {"match": first is None, "first_diff": first, "recorded_calls": len(a), "replayed_calls": len(b)}


def _diff_fields(old: dict, new: dict) -> dict:
    return {k: [old.get(k), new.get(k)] for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def cmd_replay(args) -> int:
    from claimgrid.commands.common import _finish
    from claimgrid.execute.engine import _execute
    from claimgrid.gateway.cassette import load_cassette, read_jsonl
    from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
    from claimgrid.inputs.tasks import load_tasks
    from claimgrid.inputs.venvs import ensure_venvs, framework_versions, load_venvs

    src, src_meta, records = _source(args.dir)
    tasks = load_tasks(args.tasks_dir)
    content = load_content_conditions(args.conditions_dir)
    swap = load_swap_conditions(args.conditions_dir)
    venvs = load_venvs(args.venvs)
    for r in records:
        for kind, name, registry in (
            ("framework", r["framework"], venvs),
            ("task", r["task"], tasks),
            ("content condition", r["content"], content),
            ("swap condition", r["swap"], swap),
        ):
            if name not in registry:
                raise ClaimgridError(f"{src.runs_path}: run {r['run_id']}: {kind} '{name}' is not available here")
    out = (
        Path(args.out)
        if args.out
        else ROOT / "ledger" / (src.folder.name + ".replay-" + dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ"))
    )
    if out.resolve() == src.folder.resolve():
        raise ClaimgridError("--out: a replay never writes into the published ledger; choose another folder")
    if out.exists():
        raise ClaimgridError(f"--out: {out} already exists")

    names = sorted({r["framework"] for r in records})
    entries = {n: venvs[n] for n in names}
    ensure_venvs(entries)
    fw_versions = {n: framework_versions(e) for n, e in entries.items()}
    version_changes = {
        n: _diff_fields((src_meta.get("frameworks") or {}).get(n) or {}, v) for n, v in fw_versions.items()
    }
    version_changes = {n: d for n, d in version_changes.items() if d}
    task_changes = sorted(
        {
            r["task"]
            for r in records
            if (r.get("parity") or {}).get("task_hash") not in (None, tasks[r["task"]].task_hash)
        }
    )

    timeout_s, max_calls = src_meta["timeout_s"], src_meta["max_model_calls"]
    isolation, jobs = src_meta.get("isolation", "warm"), args.jobs or src_meta.get("jobs") or 2
    # Replay serves recordings (no provider): the recorded grid's in-flight cap, else the default.
    from claimgrid.execute.admission import Schedule, default_max_inflight

    inflight = ((src_meta.get("schedule") or {}).get("max_inflight")) or default_max_inflight(jobs)
    schedule = Schedule(jobs, max(inflight, jobs))
    meta = {
        k: v
        for k, v in src_meta.items()
        if k not in ("resumed", "budget_stops", "stopped_at_budget", "spend", "finished", "wall_s")
    }
    meta.update(
        {
            "grid_id": out.name,
            "command": "uv run grid.py " + " ".join(sys.argv[1:]),
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "finished": None,
            "wall_s": None,
            "frameworks": fw_versions,
            "retries": {},
            "resumed": [],
            "stopped_at_budget": None,
            "replay_of": {
                "folder": str(src.folder),
                "grid_id": src_meta.get("grid_id"),
                "frameworks": src_meta.get("frameworks"),
                "claimgrid_commit": src_meta.get("claimgrid_commit"),
            },
        }
    )
    from claimgrid.commands.common import _commit

    meta["claimgrid_commit"] = _commit()
    store = RunStore(out)
    store.create(meta, command=meta["command"])

    cells = [Cell(**{k: r[k] for k in CELL_FIELDS}) for r in records]
    print(
        f"replay of {src.folder} ({len(cells)} runs) into {out}: offline, recorded responses only; "
        f"{jobs} jobs, isolation {isolation}",
        flush=True,
    )
    if version_changes:
        print(f"note: framework versions differ from the recording: {json.dumps(version_changes)}", flush=True)
    t0 = time.monotonic()
    for path in src_meta.get("policies") or ():  # reference policies the recording registered
        from claimgrid.reference import registry as policy_registry

        policy_registry.load_policies(path)
    from claimgrid.sandbox.guard import detect

    # The recording's sandbox setting: tool results (and so requests) depend on it.
    recorded_guard: dict = src_meta["guard"] if isinstance(src_meta.get("guard"), dict) else {}
    args.guard = "off" if recorded_guard.get("guard") == "off" else "auto"
    guard = detect(args.guard)
    _execute(
        cells,
        store,
        tasks,
        content,
        swap,
        entries,
        fw_versions,
        timeout_s,
        max_calls,
        isolation,
        schedule,
        progress=not args.no_progress,
        meta=meta,
        guard=guard,
        args=args,
        replay_dir=src.folder,
        delegations={
            r["run_id"]: (r.get("facts") or {}).get("delegation_id")
            for r in records
            if (r.get("facts") or {}).get("delegation_id")
        },
    )
    meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    meta["wall_s"] = round(time.monotonic() - t0, 1)

    published = {r["run_id"]: r for r in records}
    replayed = {r["run_id"]: r for r in store.records()}
    rows = []
    for run_id, old in published.items():
        new = replayed.get(run_id)
        if new is None:
            rows.append(
                {
                    "run_id": run_id,
                    "replayed": False,
                    "requests": None,
                    "classification_match": False,
                    "classification_diff": None,
                }
            )
            continue
        requests = compare_requests(
            load_cassette(src.runs_dir / run_id), read_jsonl(store.runs_dir / run_id / "gateway.jsonl")
        )
        diff = _diff_fields(old["classification"], new["classification"])
        rows.append(
            {
                "run_id": run_id,
                "replayed": True,
                "requests": requests,
                "classification_match": not diff,
                "classification_diff": diff or None,
            }
        )
    same_requests = sum(1 for r in rows if r["requests"] and r["requests"]["match"])
    same_class = sum(1 for r in rows if r["classification_match"])
    summary = {
        "source": str(src.folder),
        "runs": len(rows),
        "requests_identical": same_requests,
        "classifications_identical": same_class,
        "framework_version_changes": version_changes,
        "task_changes": task_changes,
        "runs_detail": rows,
    }
    meta["replay"] = {k: v for k, v in summary.items() if k != "runs_detail"}
    store.write_meta(meta)
    (out / "replay.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "REPLAY.md").write_text(_markdown(summary))
    _finish(store)
    print(
        f"replay: {len(rows)} runs; same requests (every request hash) in {same_requests}/{len(rows)}; "
        f"same classification in {same_class}/{len(rows)}"
    )
    for r in rows:
        if not (r["requests"] and r["requests"]["match"] and r["classification_match"]):
            print("  " + _row_text(r))
    print(f"report: {out / 'REPLAY.md'}")
    return 0 if same_requests == same_class == len(rows) else 1


def _row_text(r: dict) -> str:
    if not r["replayed"]:
        return f"{r['run_id']}: not replayed (harness error)"
    q = r["requests"]
    req = (
        "same requests"
        if q["match"]
        else f"requests differ from call {q['first_diff']} ({q['recorded_calls']} recorded, {q['replayed_calls']} replayed)"
    )
    cls = (
        "same classification"
        if r["classification_match"]
        else "classification differs: "
        + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in r["classification_diff"].items())
    )
    return f"{r['run_id']}: {req}; {cls}"


def _markdown(s: dict) -> str:
    lines = [
        f"# Replay of `{s['source']}`",
        "",
        "Every run re-executed offline; each model call answered from the recording.",
        "",
        f"- runs: {s['runs']}",
        f"- same requests (every request hash): {s['requests_identical']}/{s['runs']}",
        f"- same classification: {s['classifications_identical']}/{s['runs']}",
        f"- framework versions changed since the recording: {json.dumps(s['framework_version_changes']) or 'none'}",
        f"- tasks changed since the recording: {', '.join(s['task_changes']) or 'none'}",
        "",
        "| run | requests | first differing call | classification |",
        "| --- | --- | --- | --- |",
    ]
    for r in s["runs_detail"]:
        q = r["requests"] or {}
        lines.append(
            f"| {r['run_id']} | {'same' if q.get('match') else 'differ' if q else 'not replayed'} "
            f"({q.get('replayed_calls', 0)}/{q.get('recorded_calls', 0)} calls) | "
            f"{'' if q.get('first_diff') is None else q['first_diff']} | "
            f"{'same' if r['classification_match'] else 'differs: ' + ', '.join((r['classification_diff'] or {}).keys())} |"
        )
    return "\n".join(lines) + "\n"
