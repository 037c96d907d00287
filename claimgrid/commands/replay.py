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
from dataclasses import replace
from pathlib import Path

from claimgrid import ROOT
from claimgrid.commands.common import commit, finish, now, read_grid_meta, signer, verify_ledger, write_meta
from claimgrid.commands.flags import data_dirs, load_data
from claimgrid.commands.options import allow_unsealed_opt, data_opts, key_opt, policies_opt
from claimgrid.errors import ClaimgridError, DataError
from claimgrid.execute.admission import default_max_inflight
from claimgrid.execute.cells import Cell
from claimgrid.execute.engine import execute
from claimgrid.execute.spec import GridInputs, GridMeta, GridSpec, Replay, RunSettings, Selection
from claimgrid.inputs.venvs import build_all, framework_versions
from claimgrid.machinepaths import scrub_text
from claimgrid.reference import registry
from claimgrid.sandbox.guard import detect
from claimgrid.store import RUNS_NAME, LedgerFolder, RunStore
from claimgrid.store.inert import check_folder, outside_ledgers, write_file
from claimgrid.store.record import dump

CELL_FIELDS = ("framework", "task", "content", "swap", "model", "substitute", "repeat")


def _source(folder: Path, allow_unsealed: bool = False) -> tuple[RunStore, GridMeta, list[dict]]:
    store, ledger = RunStore(folder), LedgerFolder(folder)
    check_folder(folder)  # a FIFO or symlink at meta.json is refused before it is read
    if not ledger.has_meta():
        raise ClaimgridError(f"{folder}: not a grid folder (no meta.json)")
    if not ledger.has_runs():
        raise ClaimgridError(f"{folder}: not a grid folder (no {RUNS_NAME})")
    meta = read_grid_meta(store)
    verify_ledger(
        store, allow_unsealed=allow_unsealed
    )  # the seal and manifests of what is replayed, each failure named
    runs = ledger.runs()  # typed by the store's reader (the last line of a run id wins)
    if not runs:
        raise ClaimgridError(f"{store.runs_path}: no completed runs to replay")
    for rec in runs:
        missing = [k for k in CELL_FIELDS if k not in rec.model_fields_set]
        if missing:
            raise ClaimgridError(f"{store.runs_path}: run {rec.run_id!r}: field '{missing[0]}' is missing")
    records = [dump(r) for r in runs]  # read on as the record writes them
    for r in records:
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
    """Re-execute every run of ``args.dir`` offline into a new folder; 0 when every run sent
    the same requests and got the same classification, 1 otherwise."""
    src, src_meta, records = _source(args.dir, args.allow_unsealed)
    # Policy files only from --policies, each recorded one by its sha256: never from the ledger.
    policy_files = registry.load_recorded(
        src_meta.policy_files, src_meta.policies, args.policies, src.meta_path, src.folder
    )
    data = load_data(args)
    _check_names(src, records, data)
    out = _out_folder(args, src)

    spec = _spec(args, src_meta, records, src.meta_path).model_copy(update={"policies": tuple(policy_files)})
    inputs = _inputs(spec, data, src_meta)
    version_changes = {
        n: _diff_fields((src_meta.frameworks or {}).get(n) or {}, v) for n, v in inputs.framework_versions.items()
    }
    version_changes = {n: d for n, d in version_changes.items() if d}
    task_changes = sorted(
        {
            r["task"]
            for r in records
            if (r.get("parity") or {}).get("task_hash") not in (None, data.tasks[r["task"]].task_hash)
        }
    )
    settings = _settings(args, src_meta)
    meta = _meta(out, src, src_meta, inputs, [r["run_id"] for r in records])
    store = RunStore(out, signer(args, out))
    store.create(meta.dump(), command=meta.command)

    cells = [Cell(**{k: r[k] for k in CELL_FIELDS}) for r in records]
    print(
        f"replay of {src.folder} ({len(cells)} runs) into {out}: offline, recorded responses only; "
        f"{settings.jobs} jobs, isolation {spec.isolation}",
        flush=True,
    )
    if version_changes:
        print(f"note: framework versions differ from the recording: {json.dumps(version_changes)}", flush=True)
    t0 = time.monotonic()
    inputs = replace(inputs, guard=detect(spec.guard_mode))
    delegations = {
        r["run_id"]: (r.get("facts") or {}).get("delegation_id")
        for r in records
        if (r.get("facts") or {}).get("delegation_id")
    }
    report = execute(cells, store, spec, settings, inputs, Replay(str(src.folder), delegations))
    meta.add_report(report)
    meta.finished = now()
    meta.wall_s = round(time.monotonic() - t0, 1)
    summary = _summary(src, store, records, version_changes, task_changes)
    return _report(store, meta, summary)


def _check_names(src: RunStore, records: list[dict], data) -> None:
    """Every framework, task and condition the recording ran exists here."""
    for r in records:
        for kind, name, names in (
            ("framework", r["framework"], data.venvs),
            ("task", r["task"], data.tasks),
            ("content condition", r["content"], data.content),
            ("swap condition", r["swap"], data.swap),
        ):
            if name not in names:
                raise ClaimgridError(f"{src.runs_path}: run {r['run_id']}: {kind} '{name}' is not available here")


def _out_folder(args, src: RunStore) -> Path:
    """``--out``, else ``ledger/<grid id>.replay-<time>``: a new folder, never the recording."""
    out = (
        Path(args.out)
        if args.out
        else ROOT / "ledger" / (src.folder.name + ".replay-" + dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ"))
    )
    if out.resolve() == src.folder.resolve():
        raise ClaimgridError("--out: a replay never writes into the published ledger; choose another folder")
    outside_ledgers(out, "--out", src.folder)
    if out.exists():
        raise ClaimgridError(f"--out: {out} already exists")
    return out


def _spec(args, src_meta: GridMeta, records: list[dict], src_meta_path: Path) -> GridSpec:
    """The recording's grid, as the replay runs it: its limits, isolation and the
    sandbox setting it ran with (tool results, and so requests, depend on it); no budget."""

    def names(key):
        return list(dict.fromkeys(r[key] for r in records))

    for key in ("timeout_s", "max_model_calls"):
        if getattr(src_meta, key) is None:
            raise DataError(src_meta_path, key, "required field is missing")
    recorded_guard = src_meta.guard if isinstance(src_meta.guard, dict) else {}
    return GridSpec(
        selection=Selection(
            frameworks=sorted(names("framework")),
            tasks=names("task"),
            content=names("content"),
            swap=names("swap"),
            models=names("model"),
            substitute=records[0]["substitute"],
            repeats=max(r["repeat"] for r in records) + 1,
        ),
        timeout_s=src_meta.timeout_s,
        isolation=src_meta.isolation or "warm",
        max_model_calls=src_meta.max_model_calls,
        guard_mode="off" if recorded_guard.get("guard") == "off" else "auto",
        data=data_dirs(args),
    )


def _inputs(spec: GridSpec, data, src_meta: GridMeta) -> GridInputs:
    """The replay's inputs; a local model's per-call deadline and server facts are the
    recording's (no server is started: every answer comes from the recording)."""
    from claimgrid.localmodel import parity_facts

    entries = {n: data.venvs[n] for n in spec.selection.frameworks}
    build_all(entries)
    versions = {n: framework_versions(e) for n, e in entries.items()}
    local = getattr(src_meta, "local_models", None) or {}
    return GridInputs(
        data.tasks,
        data.content,
        data.swap,
        entries,
        versions,
        call_deadlines={m: f["deadline"]["seconds"] for m, f in local.items()},
        served_models={m: parity_facts(f) for m, f in local.items()},
    )


def _settings(args, src_meta: GridMeta) -> RunSettings:
    """Replay serves recordings (no provider): the recorded grid's in-flight cap, else the default."""
    jobs = args.jobs or src_meta.jobs or 2
    inflight = (src_meta.schedule or {}).get("max_inflight") or default_max_inflight(jobs)
    return RunSettings(jobs=jobs, max_inflight=max(inflight, jobs), progress=not args.no_progress)


def _meta(out: Path, src: RunStore, src_meta: GridMeta, inputs: GridInputs, planned: list[str]) -> GridMeta:
    """The replay's meta.json: the recording's, less what belongs to its invocations, plus
    where it comes from (``replay_of``); its plan is the recorded runs it replays (a sealed
    ledger's lines are checked against it)."""
    gone = ("resumed", "resumed_commits", "budget_stops", "stopped_at_budget", "spend", "finished", "wall_s")
    meta = {k: v for k, v in src_meta.dump().items() if k not in gone}
    meta.update(
        {
            "grid_id": out.name,
            "command": scrub_text("uv run grid.py " + " ".join(sys.argv[1:])),
            "started": now(),
            "finished": None,
            "wall_s": None,
            "frameworks": inputs.framework_versions,
            "retries": {},
            "grid_size": len(planned),
            "plan": planned,
            "resumed": [],
            "resumed_commits": [],
            "stopped_at_budget": None,
            "replay_of": {
                "folder": str(src.folder),
                "grid_id": src_meta.grid_id,
                "frameworks": src_meta.frameworks,
                "claimgrid_commit": src_meta.claimgrid_commit,
            },
        }
    )
    meta["claimgrid_commit"] = commit()
    return GridMeta.model_validate(meta)


def _summary(src: RunStore, store: RunStore, records: list[dict], version_changes: dict, task_changes: list) -> dict:
    """replay.json: per run, the request hashes and the classification against the recording."""
    from claimgrid.gateway.cassette import load_cassette, read_jsonl

    replayed = {r.run_id: dump(r) for r in LedgerFolder(store.folder).runs()}
    rows = []
    for run_id, old in {r["run_id"]: r for r in records}.items():
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
            load_cassette(LedgerFolder(src.folder), run_id), read_jsonl(store.runs_dir / run_id / "gateway.jsonl")
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
    return {
        "source": str(src.folder),
        "runs": len(rows),
        "requests_identical": sum(1 for r in rows if r["requests"] and r["requests"]["match"]),
        "classifications_identical": sum(1 for r in rows if r["classification_match"]),
        "framework_version_changes": version_changes,
        "task_changes": task_changes,
        "runs_detail": rows,
    }


def _report(store: RunStore, meta: GridMeta, summary: dict) -> int:
    """meta.json, replay.json, REPLAY.md and the ledger; the summary lines; the exit status."""
    out, rows = store.folder, summary["runs_detail"]
    same_requests, same_class = summary["requests_identical"], summary["classifications_identical"]
    meta.replay = {k: v for k, v in summary.items() if k != "runs_detail"}
    write_meta(store, meta)
    write_file(out / "replay.json", json.dumps(summary, indent=2) + "\n")
    write_file(out / "REPLAY.md", _markdown(summary))
    finish(store)
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


def add_parser(sub) -> None:
    """``grid.py replay DIR``."""
    rp = sub.add_parser(
        "replay",
        help="re-execute every run of a ledger offline, serving its recorded model "
        "responses; report request-hash and classification matches",
    )
    rp.add_argument("dir", type=Path, help="the published ledger folder")
    data_opts(rp)
    policies_opt(rp)
    key_opt(rp)
    allow_unsealed_opt(rp)
    rp.add_argument(
        "--out", type=Path, default=None, help="new ledger folder (default: ledger/<grid id>.replay-<time>)"
    )
    rp.add_argument("--jobs", type=int, default=None, help="parallel runs (default: the recorded grid's)")
    rp.add_argument("--no-progress", action="store_true")
