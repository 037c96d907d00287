"""Adapter conformance, run for every framework in ``venvs.toml`` (no framework named here).

Each rule of docs/CONTRACTS.md "Adapter correctness rules" has one test below. One
module-scoped fixture per framework runs a small set of real cells (real venv, warm
launcher, real gateway with the reference models, real verifier and classifier, through
``claimgrid.execute.runner.run_cell`` exactly as ``grid.py`` does) and every check reads those
records: per framework about a dozen runs, three at a time (the `slow` fault's run sleeps past
its deadline meanwhile). Cells are chosen from data:
every task in ``tasks/``, every fault model of the reference registry, and tasks picked
by role through ``reference_truth.expected_claim_verdict``.

Add an entry to ``venvs.toml`` and these tests run for it; ``uv run --group dev pytest -k NAME`` runs
only that framework's.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from claimgrid.execute.cells import Cell
from claimgrid.execute.runner import GridContext, run_cell
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite
from claimgrid.inputs.venvs import framework_versions, load_venvs
from claimgrid.launch import Launcher, adapter_env
from claimgrid.reference import registry, shapes, tool_faults
from claimgrid.reference.truth import expected_claim_verdict
from claimgrid.rule_texts import rule_of
from claimgrid.store import RunStore
from claimgrid.store.record import dump
from claimgrid.vocab import HANDLING
from frameworks._harness.harness_shared.probe_kinds import ShapeKind

from tests.error_events import duplicate_errors

pytestmark = pytest.mark.frameworks

FRAMEWORKS = list(load_venvs())
# A coding agent with its own tools (kind = "cli") passes the same suite, in every run of it: its
# venv (an npm install of hundreds of MB) is built when its tests are selected (tests/conftest.py).
PARAMS = FRAMEWORKS
TIMEOUT_S = 120.0
BUDGET = 24
CALL_DEADLINE_S = 5.0  # the per-call deadline; the `slow` fault answers 2 s past it (kept short: CI time)
CLEAN, NONE, REPORTED = "clean", "none", "reported"
PROCESS_RESULTS = {"ok", "adapter_error", "crash", "timeout"}
FAULT_MODELS = registry.fault_models()  # views of the registry: the entries are the source
PROBES = [m for m in FAULT_MODELS if tool_faults.tool_fault(m) or shapes.shape_of(m)]  # tool faults, shapes
# Every fault model that is not a probe, and the first probe of each kind (a tool fault, an
# output shape); every probe with CLAIMGRID_DEEP=1 (the full default matrix runs all of them
# on every framework; in CI the suite has to fit its 20 minutes).
_FIRST_OF_KIND = {
    next((m for m in PROBES if tool_faults.tool_fault(m)), None),
    next((m for m in PROBES if shapes.shape_of(m)), None),
}
RUN_FAULTS = [
    m for m in FAULT_MODELS if m not in PROBES or m in _FIRST_OF_KIND or os.environ.get("CLAIMGRID_DEEP") == "1"
]
# The extra-args probe too, on every entry whose calls pass the harness tool layer: whether its
# call ran with the extra argument dropped is read from the tool layer's record, whatever the
# framework's tool message looks like (one run per entry).
EXTRA_ARGS = next(m for m in PROBES if shapes.shape_of(m) == ShapeKind.EXTRA_ARGS)


def run_faults(entry) -> list[str]:
    """The fault models an entry's conformance runs use: RUN_FAULTS, and EXTRA_ARGS unless the
    entry brings its own tools."""
    return RUN_FAULTS + ([EXTRA_ARGS] if EXTRA_ARGS not in RUN_FAULTS and not entry.is_cli else [])


DEFAULT_SUBSTITUTE = registry.default_substitute()


@dataclass
class Conformance:
    """One framework's conformance runs: ``records[(task, swap, model)]`` and its store."""

    name: str
    entry: object
    store: RunStore
    records: dict = field(default_factory=dict)
    fresh: dict = field(default_factory=dict)
    warm_fresh_key: tuple = ()
    folder: Path = Path()  # kept when a check fails
    failed: str = ""  # the node id of the first failed check, whose report shows the runs

    def events(self, record: dict) -> list[dict]:
        return self.store.load_events(record["run_id"])


def _pick(tasks, model: str, verdict: str) -> str:
    """The first task (sorted id) on which ``model``'s documented truth is ``verdict``."""
    for tid in sorted(tasks):
        if expected_claim_verdict(model, tasks[tid].role) == verdict:
            return tid
    raise AssertionError(f"no task in tasks/ gives {model} the verdict {verdict!r}")


def _cells(tasks, entry) -> tuple[list[tuple], tuple]:
    builder = _pick(tasks, "reader", "read-only imposture")
    cells = [(tid, NONE, "diligent") for tid in sorted(tasks)]
    cells += [
        (_pick(tasks, "narrator", "narration only"), NONE, "narrator"),
        (builder, NONE, "reader"),
        (builder, REPORTED, "diligent"),
    ]
    cells += [(builder, NONE, m) for m in run_faults(entry)]
    return cells, (builder, NONE, "diligent")


def _run_all(name, entry, cells, isolation, tasks, gateway, folder) -> dict:
    store = RunStore(folder)
    store.create({"grid_id": folder.name})
    content, swap = load_content_conditions(), load_swap_conditions()
    with Launcher({name: entry}, isolation) as launcher:
        ctx = GridContext(
            tasks=tasks,
            content=content,
            swap=swap,
            gateway=gateway,
            launcher=launcher,
            store=store,
            # The framework's own documented back-off is kept, so the deadline allows for it.
            work_dir=folder / "work",
            timeout_s=TIMEOUT_S + entry.retry_backoff_s,
            max_model_calls=BUDGET,
            isolation=isolation,
            framework_versions={name: framework_versions(entry)},
            model_call_timeout_s=CALL_DEADLINE_S,
        )
        for tid in {c[0] for c in cells}:  # templates are built before threads share them
            ctx.template(tasks[tid], content[CLEAN])
        todo = [Cell(name, t, CLEAN, s, m, DEFAULT_SUBSTITUTE, 0) for t, s, m in cells]
        with ThreadPoolExecutor(max_workers=3) as pool:
            records = [dump(r) for r in pool.map(lambda c: run_cell(c, ctx), todo)]  # as the ledger line reads
    return store, {(r["task"], r["swap"], r["model"]): r for r in records}


@pytest.fixture(scope="module")
def gateway():
    from claimgrid.gateway import Gateway

    with Gateway() as gw:
        yield gw


@pytest.fixture(scope="module", params=PARAMS)
def fw(request, tasks, gateway, tmp_path_factory) -> Conformance:
    """One framework's conformance runs; when a check on them fails, the folder is kept and
    the failing test's report shows every run's evidence (``_evidence_on_failure``)."""
    name = request.param
    entry = load_venvs()[name]
    folder = tmp_path_factory.mktemp(f"conformance-{name}")
    cells, warm_fresh = _cells(in_suite(tasks, "default"), entry)  # the default grid's tasks (real ones run apart)
    t0 = time.monotonic()
    store, records = _run_all(name, entry, cells, "warm", tasks, gateway, folder / "warm")
    t1 = time.monotonic()
    _, fresh = _run_all(name, entry, [warm_fresh], "fresh", tasks, gateway, folder / "fresh")
    # Shown with -s: what the suite costs per framework (CI time is budgeted).
    print(
        f"\nconformance {name}: {len(cells)} warm runs {t1 - t0:.1f}s, 1 fresh run {time.monotonic() - t1:.1f}s; "
        + ", ".join(f"{k[2]}/{k[0]}/{k[1]} {r['timings']['wall_s']:.1f}s" for k, r in records.items())
    )
    conformance = Conformance(name, entry, store, records, fresh, warm_fresh, folder)
    yield conformance
    if not conformance.failed:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _evidence_on_failure(request, fw):
    """A failed check's report ends with the evidence a newcomer debugging an adapter needs,
    not only a tuple: where the runs are kept, and per run its classification with the rule
    behind each value, what it did with its fault, the adapter's exception and its gateway
    exchanges. Printed in the failing test's own teardown (pytest shows a failed test's
    teardown output, under xdist too); the first failure of a framework prints every run,
    a later one points to it."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed == failed_before:
        return
    print(f"conformance {fw.name}: a check failed; the runs are kept in {fw.folder}")
    if fw.failed:
        print(f"  (each run's evidence: in the report of {fw.failed}, the first failed check)")
    else:
        fw.failed = request.node.nodeid
        for line in [ln for r in fw.records.values() for ln in run_evidence(fw.folder / "warm", r)]:
            print(line)


EVIDENCE_FIELDS = ("claim_verdict", "outcome", "claim_vs_outcome", "process")


def run_evidence(folder: Path, r: dict) -> list[str]:
    """One run's evidence as lines: where it is, its classification and the rule behind each
    value, its fault handling, the adapter's exception, its gateway exchanges."""
    c = r["classification"]
    out = [f"  {r['run_id']}: {folder / r['evidence_dir']}"]
    out += [f"    {f} {c.get(f)!r}: {rule_of(f, c.get(f))}" for f in EVIDENCE_FIELDS]
    out.append(f"    channels {c.get('channels')!r}, evidence {c.get('evidence')}")
    faults = r.get("faults") or {}
    if faults.get("fault"):
        out.append(
            f"    fault {faults['fault']}: reaction {faults.get('reaction')!r}, handling "
            f"{faults.get('handling')!r} ({'; '.join(faults.get('handling_evidence') or [])})"
        )
    events = folder / r["evidence_dir"] / "events.jsonl"
    for line in events.read_text().splitlines() if events.is_file() else []:
        e = json.loads(line)
        if e.get("source") == "process" and e.get("adapter_exception"):
            exc = e["adapter_exception"]
            out.append(f"    adapter exception {exc.get('type')}: {str(exc.get('message'))[:200]}")
        if e.get("source") == "gateway" and e.get("kind") == "exchange":
            calls = ", ".join(f"{t['name']}({t['arguments'][:60]})" for t in e.get("tool_calls") or [])
            out.append(
                f"    gateway call {e.get('call_index')}: {e.get('status')} {e.get('finish_reason')} "
                f"{calls or repr((e.get('content') or '')[:80])}"
            )
    return out


def _diligent(fw: Conformance) -> list[dict]:
    return [r for (t, s, m), r in fw.records.items() if m == "diligent" and s == NONE]


# ---------------------------------------------------------------- the rules


def test_diligent_passes_every_task(fw, tasks):
    """Rule: the adapter exposes the harness tools natively and returns the agent's final text."""
    runs = _diligent(fw)
    assert sorted(r["task"] for r in runs) == sorted(in_suite(tasks, "default"))
    for r in runs:
        c = r["classification"]
        assert (c["process"], c["outcome"], c["claim_vs_outcome"]) == ("ok", "PASS", "TRUE_SUCCESS"), (r["run_id"], c)


def test_narrator_is_narration_only(fw):
    (r,) = [r for k, r in fw.records.items() if k[2] == "narrator"]
    assert (r["classification"]["claim_verdict"], r["classification"]["claim_vs_outcome"]) == (
        "narration only",
        "FALSE_SUCCESS",
    ), r["classification"]


def test_reader_is_read_only_imposture(fw):
    (r,) = [r for k, r in fw.records.items() if k[2] == "reader"]
    assert r["classification"]["claim_verdict"] == "read-only imposture", r["classification"]


def test_fresh_and_warm_classify_identically(fw):
    """Rule: preload() imports what run() needs and nothing a run depends on differs by mode."""
    warm, fresh = fw.records[fw.warm_fresh_key], fw.fresh[fw.warm_fresh_key]
    assert fresh["parity"]["isolation"] == "fresh" and warm["parity"]["isolation"] == "warm"
    assert fresh["classification"] == warm["classification"]


def test_runtime_attribution_is_the_frameworks(fw):
    """Rule: runtime events name the agent the framework attributes the work to."""
    for r in _diligent(fw):
        assert r["classification"]["agent_from"] == "runtime", r["run_id"]
        runtime_tools = [e for e in fw.events(r) if e["source"] == "runtime" and e["kind"] == "tool_call"]
        assert runtime_tools and all(e.get("agent") for e in runtime_tools), r["run_id"]


def test_served_model_name_comes_from_the_response(fw):
    """Rule: the model name on runtime model_call events is the one the response carried:
    under a reported swap the substitute's name reaches the runtime channel."""
    r = fw.records[(fw.warm_fresh_key[0], REPORTED, "diligent")]
    seen = [e.get("model") for e in fw.events(r) if e["source"] == "runtime" and e["kind"] == "model_call"]
    served = [e.get("reported_model") for e in fw.events(r) if e["source"] == "gateway" and e.get("reported_model")]
    assert DEFAULT_SUBSTITUTE in served, served
    if fw.entry.is_cli and all(m is None for m in seen):
        # An agent with its own runtime that names no model on its events (Codex CLI): none is
        # invented, and the swap is visible from the gateway's record alone. One that names
        # them (Claude Code's stream) is held to the rule.
        assert seen, seen
    else:
        assert DEFAULT_SUBSTITUTE in seen, seen
    assert r["classification"]["swap"] == "visible"


def test_tool_events_come_from_the_harness_tool_layer(fw):
    """Rule: the framework calls the harness tools themselves (no re-implementation): every
    tool call the runtime reports is one the harness tool layer executed, in order."""
    for r in _diligent(fw):
        ev = fw.events(r)
        harness = [(e["tool"], e["args"]) for e in ev if e["source"] == "tools"]
        runtime = [(e["tool"], e["args"]) for e in ev if e["source"] == "runtime" and e["kind"] == "tool_call"]
        if fw.entry.is_cli:
            # An agent with its own tools (venvs.toml kind = "cli"): no call passes the tool layer,
            # and every command its runtime reports is a call the model made at the gateway, in order.
            requested = [
                (c["name"], json.loads(c["arguments"]))
                for e in ev
                if e["source"] == "gateway"
                for c in e.get("tool_calls") or []
            ]
            assert not harness and runtime and len(runtime) == len(requested), r["run_id"]
            for (tool, args), (name, asked) in zip(runtime, requested, strict=True):
                # The runtime may name the command as its shell ran it (`bash -c '<command>'`).
                ran = {k: {v, shlex.split(v)[-1]} if isinstance(v, str) and v else {v} for k, v in args.items()}
                assert tool == name and all(v in ran.get(k, ()) for k, v in asked.items()), (r["run_id"], args, asked)
            assert r["classification"]["channels"] == "consistent", r["run_id"]
            continue
        assert harness and runtime == harness, r["run_id"]


def test_turn_limit_is_at_least_the_model_call_budget(fw):
    """Rule: the framework's own turn limit is set from budgets.max_model_calls (or the
    framework has none and the gateway's budget refusal is the stop)."""
    for r in fw.records.values():
        limits = [e for e in fw.events(r) if e["source"] == "runtime" and e["kind"] == "limits"]
        assert len(limits) == 1, (r["run_id"], "no runtime 'limits' event (kit.record_limits)")
        lim = limits[0]
        assert lim["max_model_calls"] == BUDGET
        if lim["turn_limit"] is None:
            assert lim["enforced_by"] == "gateway", lim
        else:
            assert lim["turn_limit"] >= BUDGET, lim


def test_retries_are_zero_at_the_client(fw):
    """Rule: LiteLLM / HTTP-client retries are 0, so every attempt is a gateway call; the
    settings are parity facts, and so is which system prompt the run used."""
    versions = next(iter(fw.records.values()))["runtime_versions"]
    retries = versions["retries"]
    assert retries.get("http_client_max_retries") == 0, retries
    assert retries.get("litellm_num_retries") in (0, None), retries
    assert versions.get("system_prompt") == "harness" or str(versions.get("system_prompt")).startswith("framework:")


def test_preload_starts_no_thread(fw, tmp_path):
    """Rule: preload() imports without starting a thread (the warm parent forks after it)."""
    home = tmp_path / "home"
    home.mkdir()
    python = str(fw.entry.venv_python)
    code = (
        "import sys, threading, adapter; getattr(adapter, 'preload', lambda: None)(); "
        "print(len([t for t in threading.enumerate() if t is not threading.main_thread()]))"
    )
    proc = subprocess.run(
        [python, "-c", code],
        cwd=fw.entry.adapter_dir,
        capture_output=True,
        text=True,
        timeout=180,
        env=adapter_env(fw.entry, str(home), python),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "0", proc.stdout


def test_every_fault_is_a_result_never_a_harness_error(fw):
    """Rule: a fault the framework does not handle propagates out of run() and is recorded
    as the run's outcome (process ok / adapter_error), with the gateway's evidence."""
    assert {m for m in PROBES if m in RUN_FAULTS} and set(RUN_FAULTS) - set(PROBES)
    for model in run_faults(fw.entry):
        (r,) = [r for k, r in fw.records.items() if k[2] == model]
        ev = fw.events(r)
        process = next(e for e in ev if e["source"] == "process")
        assert process["outcome_status"] == "ok", (r["run_id"], process)
        assert r["classification"]["process"] in PROCESS_RESULTS
        assert any(e["source"] == "gateway" for e in ev), r["run_id"]
        err = process.get("adapter_exception")
        assert r["classification"]["process"] != "adapter_error" or (err and err.get("type")), r["run_id"]
        if model in PROBES:  # what the framework did with the probe is recorded, with its evidence
            assert r["faults"]["handling"] in HANDLING and r["faults"]["handling_evidence"], (r["run_id"], r["faults"])


def test_extra_args_handling_is_what_the_tool_layer_ran(fw):
    """The extra-args probe is diligent with one answer inserted first (a read_file call with an
    argument its schema lacks; diligent sees its own steps only). Against the framework's
    diligent run of the same task, the tool layer ran one call more (that call, with or
    without the extra argument) or none, and ``faults.handling`` says the same, whatever the
    framework's tool message holds."""
    if fw.entry.is_cli:
        pytest.skip(f"{fw.name} brings its own tools: no call passes the harness tool layer")
    task = fw.warm_fresh_key[0]
    probe, diligent = fw.records[(task, NONE, EXTRA_ARGS)], fw.records[(task, NONE, "diligent")]

    def ran(r):
        return Counter(
            (e["tool"], json.dumps(e["args"], sort_keys=True)) for e in fw.events(r) if e["source"] == "tools"
        )

    asked = next(
        json.loads(c["arguments"])
        for e in fw.events(probe)
        if e["source"] == "gateway"
        for c in e.get("tool_calls") or []
    )
    more = list((ran(probe) - ran(diligent)).elements())
    assert len(more) <= 1, (probe["run_id"], more)
    if not more:
        expected = {"refused the arguments"}
    elif set(json.loads(more[0][1])) == set(asked):
        expected = {"passed the arguments to the tool"}
    else:
        expected = {"dropped the extra arguments"}
    handling = probe["faults"]["handling"]
    assert handling in expected or (probe["faults"]["reaction"] == "raised" and handling == "raised"), (
        probe["run_id"],
        handling,
        more,
        probe["faults"]["handling_evidence"],
    )


def test_each_failure_is_recorded_once(fw):
    """Rule: a failure the framework reports, raises, or both is one runtime error event
    (kit.recording_errors / RunErrors); a streak of identical error events is allowed only up
    to the failures the harness itself saw (tests/error_events.py, shown failing on a faulty
    adapter by tests/grid/execute/test_error_once.py)."""
    for r in fw.records.values():
        assert duplicate_errors(fw.events(r)) == [], r["run_id"]


def test_evidence_bundle_is_complete(fw):
    for r in fw.records.values():
        assert fw.store.verify_manifest(r["run_id"]) == [], r["run_id"]
        json.loads((Path(fw.store.folder) / r["evidence_dir"] / "control.json").read_text())
