"""A grid of reference models never imports LiteLLM; a real model imports it on first need.

``import litellm`` costs seconds of CPU (bench/README.md): every ``grid.py`` start paid it while the
gateway sent reference calls through LiteLLM's Router. Each test runs a fresh interpreter
(sys.modules starts clean) and reports which LiteLLM modules were loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from claimgrid.store.lines import read_events

from tests.conftest import ROOT

GATEWAY_PROBE = r"""
import json, sys
import httpx
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.gateway import Gateway, RunScript
from claimgrid.reference.script import CallLimits
from claimgrid.reference.registry import NAMES
from claimgrid.inputs.tasks import load_tasks

def loaded():
    return sorted(m for m in sys.modules if m == "litellm" or m.startswith("litellm."))

task = load_tasks()["fix-float-add"]
content, swaps = load_content_conditions()["clean"], load_swap_conditions()
msgs = [{"role": "user", "content": "go"}]

client = httpx.Client(timeout=120)

def calls(gw, token, model, n, stream=False):
    out = []
    for _ in range(n):
        r = client.post(gw.url + "/chat/completions", headers={"Authorization": f"Bearer {token}"},
                        json={"model": model, "messages": msgs, "stream": stream})
        out.append(r.status_code)
    return out

gw = Gateway(); gw.start()
statuses = {}
for model in list(NAMES):
    for swap in ("none", "silent", "reported", "bound"):
        token = f"{model}-{swap}"
        gw.register(token, RunScript.for_cell(token, task, content, swaps[swap], model, "reader",
                                              "builder", limits=CallLimits(model_call_timeout_s=0.0)))
        statuses[token] = calls(gw, token, model, 3, stream=swap == "reported")
        gw.finish(token)
after_reference = loaded()

# A real model: a second gateway on loopback stands in for the provider, reached as
# openai/gpt-4o-mini (the key and base URL from the environment, as for a hosted API).
upstream = Gateway(); upstream.start()
upstream.register("upstream-key", RunScript.for_cell("u", task, content, swaps["none"], "diligent",
                                                     "reader", "builder", limits=CallLimits(max_model_calls=100)))
import os
os.environ["OPENAI_API_BASE"], os.environ["OPENAI_API_KEY"] = upstream.url, "upstream-key"
gw.register("real", RunScript.for_cell("real", task, content, swaps["none"], "openai/gpt-4o-mini",
                                       "reader", "builder"))
real = calls(gw, "real", "gpt-4o-mini", 2)
events, _ = gw.finish("real")
print("RESULT " + json.dumps({
    "after_reference": after_reference, "statuses": statuses, "real": real,
    "real_served": [e["served_model"] for e in events], "real_cost": [e["cost_usd"] for e in events],
    "after_real": len(loaded()), "upstream_served": len(upstream.finish("upstream-key")[0]),
    "offline_env": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")}))
gw.stop(); upstream.stop()
"""

# grid.py's own entry point, run in this interpreter so that sys.modules can be read at exit.
GRID_WRAPPER = r"""
import atexit, json, runpy, sys
root, report = sys.argv[1], sys.argv[2]

def write():
    with open(report, "w") as fh:
        json.dump(sorted(m for m in sys.modules if m == "litellm" or m.startswith("litellm.")), fh)

atexit.register(write)
sys.path.insert(0, root)
sys.argv = ["grid.py"] + sys.argv[3:]
runpy.run_path(root + "/grid.py", run_name="__main__")
"""


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "OPENAI_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.deep
def test_reference_calls_never_import_litellm_and_a_real_model_does_on_first_call():
    proc = subprocess.run(
        [sys.executable, "-c", GATEWAY_PROBE], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    # Every reference model under every swap was served (or refused, as the swap and the
    # gateway faults say) with LiteLLM never imported.
    assert result["after_reference"] == []
    statuses = result["statuses"]
    assert statuses["diligent-none"] == [200, 200, 200]
    assert statuses["diligent-silent"] == statuses["diligent-reported"] == [200, 200, 200]
    assert statuses["diligent-bound"] == [200, 200, 503]
    assert statuses["transient-500-none"] == [200, 500, 200]
    # The first real-model call imported LiteLLM (with the offline switches) and was served.
    assert result["real"] == [200, 200]
    assert result["real_served"] == ["openai/gpt-4o-mini"] * 2
    assert all(c is not None and c > 0 for c in result["real_cost"])
    assert result["after_real"] > 0 and result["upstream_served"] == 2
    assert result["offline_env"] == "True"


def _grid(tmp_path: Path, name: str, *args: str) -> list[str]:
    """Run ``grid.py ARGS`` in a fresh interpreter; the LiteLLM modules it had loaded at exit."""
    report = tmp_path / f"{name}.modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", GRID_WRAPPER, str(ROOT), str(report), *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    return json.loads(report.read_text())


@pytest.mark.deep
def test_reference_grid_and_its_replay_never_import_litellm(tmp_path, plain_venvs):
    out = tmp_path / "grid"
    # --max-cost: the budget's up-front price check runs too (reference models: unpriced).
    loaded = _grid(
        tmp_path,
        "run",
        "run",
        "--venvs",
        str(plain_venvs),
        "--tasks",
        "fix-float-add",
        "--content",
        "clean",
        "--swap",
        "none,silent,reported,bound",
        "--models",
        "diligent",
        "--jobs",
        "2",
        "--max-cost",
        "1",
        "--out",
        str(out),
        "--no-progress",
    )
    assert loaded == []
    exchanges = [e for p in (out / "runs").glob("*/events.jsonl") for e in read_events(p)]
    exchanges = [e for e in exchanges if e.get("source") == "gateway" and e.get("kind") == "exchange"]
    served = {(e["swap"], e["served_model"]) for e in exchanges if e["status"] == 200}
    # The gateway really served calls, the substitute included, in the same process.
    assert ("none", "diligent") in served and ("reported", "reader") in served and ("silent", "reader") in served
    assert any(e["swap"] == "bound" and e["status"] == 503 for e in exchanges)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["spend"]["unpriced_models"] == ["diligent", "reader"]

    loaded = _grid(
        tmp_path,
        "replay",
        "replay",
        str(out),
        "--out",
        str(tmp_path / "replay"),
        "--venvs",
        str(plain_venvs),
        "--jobs",
        "2",
        "--no-progress",
    )
    assert loaded == []
    replay = json.loads((tmp_path / "replay" / "replay.json").read_text())
    assert replay["runs"] == replay["requests_identical"] == replay["classifications_identical"] == 4
