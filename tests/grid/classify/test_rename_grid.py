"""No classification reads a name: the default matrix with every shipped task, condition and
reference model renamed (data only) is classified exactly as the original, run by run.

The original side is the session grid ``default_grid``; the renamed side copies ``tasks/``
and ``conditions/`` under new names (folder, file and ``id`` / ``name`` fields), registers
every built-in reference model again under a new name from a policies file (the same policy,
truth, conditions and fault), and runs the same full default grid on ``plain`` through
``grid.py run --tasks-dir --conditions-dir --policies --models --substitute``. A swap condition
that refuses from call 0 under a name no shipped condition has is classified from the
gateway's refusal too.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference import registry
from claimgrid.store.record import read_records

from tests.conftest import ROOT

PREFIX = "renamed-"

POLICIES = '''
"""Every built-in reference model again, under a new name (data only: same policy, truth, fault)."""
import dataclasses

from claimgrid.reference import registry

for entry in [m for m in registry.models().values() if m.origin == "claimgrid"]:
    registry.register(dataclasses.replace(entry, name=PREFIX + entry.name, origin=__file__,
                                          default=False, substitute=False))
'''


def _renamed_tasks(dest: Path) -> dict[str, str]:
    """Copy every task folder under a new id; old id -> new id."""
    names = {}
    for task in load_tasks().values():
        new = PREFIX + task.id
        shutil.copytree(task.folder, dest / new, symlinks=True)
        toml = dest / new / "task.toml"
        text, n = re.subn(rf'^id = "{re.escape(task.id)}"$', f'id = "{new}"', toml.read_text(), count=1, flags=re.M)
        assert n == 1, toml
        toml.write_text(text)
        names[task.id] = new
    return names


def _renamed_conditions(dest: Path, kind: str, conditions: dict) -> dict[str, str]:
    """Copy conditions/<kind>/*.toml under new names; old name -> new name."""
    (dest / kind).mkdir(parents=True)
    names = {}
    for name in conditions:
        src = ROOT / "conditions" / kind / f"{name}.toml"
        new = PREFIX + name
        text, n = re.subn(rf'^name = "{re.escape(name)}"$', f'name = "{new}"', src.read_text(), count=1, flags=re.M)
        assert n == 1, src
        (dest / kind / f"{new}.toml").write_text(text)
        names[name] = new
    return names


def _key(r, names: dict[str, dict[str, str]]):
    """A record's cell in the original's names (the renamed side mapped back)."""
    back = {k: {new: old for old, new in m.items()} for k, m in names.items()}
    return (
        r.framework,
        back["task"].get(r.task, r.task),
        back["content"].get(r.content, r.content),
        back["swap"].get(r.swap, r.swap),
        back["model"].get(r.model, r.model),
        back["model"].get(r.substitute, r.substitute),
        r.repeat,
    )


# Two full default grids when it is the session grid's first reader (the grid lane's 600 s
# is one grid's worth on a loaded machine).
@pytest.mark.deep
@pytest.mark.timeout(1200)
def test_renamed_data_gets_identical_classifications(default_grid, plain_venvs, tmp_path):
    data = tmp_path / "data"
    names = {
        "task": _renamed_tasks(data / "tasks"),
        "content": _renamed_conditions(data / "conditions", "content", load_content_conditions()),
        "swap": _renamed_conditions(data / "conditions", "swap", load_swap_conditions()),
        "model": {m: PREFIX + m for m in registry.models() if registry.get(m).origin == "claimgrid"},
    }
    policies = tmp_path / "renamed_policies.py"
    policies.write_text(f"PREFIX = {PREFIX!r}\n" + POLICIES)
    models = ",".join(names["model"][m] for m in registry.default_models())
    out = tmp_path / "renamed"
    assert (
        main(
            [
                "run",
                "--venvs",
                str(plain_venvs),
                "--out",
                str(out),
                "--jobs",
                "4",
                "--no-progress",
                "--tasks-dir",
                str(data / "tasks"),
                "--conditions-dir",
                str(data / "conditions"),
                "--policies",
                str(policies),
                "--models",
                models,
                "--substitute",
                names["model"][registry.default_substitute()],
            ]
        )
        == 0
    )

    original = {_key(r, names): r for r in read_records(default_grid / "runs.jsonl")}
    renamed = {_key(r, names): r for r in read_records(out / "runs.jsonl")}
    assert set(renamed) == set(original) and len(original) == len(read_records(default_grid / "runs.jsonl"))
    model_back = {new: old for old, new in names["model"].items()}
    differ = []
    for key, r in renamed.items():
        o = original[key]
        assert r.task != o.task and r.content != o.content and r.swap != o.swap and r.model != o.model
        faults = r.faults.model_dump() if r.faults else None
        if faults and faults["fault"]:
            faults["fault"] = model_back[faults["fault"]]
        got = (r.classification.model_dump(), r.truth, faults)
        want = (o.classification.model_dump(), o.truth, o.faults.model_dump() if o.faults else None)
        if got != want:
            differ.append(
                f"{o.run_id}: "
                + ", ".join(
                    f"{f}: {o.classification.model_dump().get(f)!r} -> {v!r}"
                    for f, v in r.classification.model_dump().items()
                    if o.classification.model_dump().get(f) != v
                )
            )
    assert not differ, f"{len(differ)} of {len(renamed)} runs differ once renamed:\n" + "\n".join(differ[:20])
    # The renamed bound condition was classified from the gateway's refusal, not its name.
    assert any(r.classification.swap == "prevented" for r in renamed.values())


def test_a_refusal_from_call_zero_under_a_new_name_is_prevented(plain_venvs, tmp_path):
    conditions = tmp_path / "conditions"
    shutil.copytree(ROOT / "conditions" / "content", conditions / "content")
    (conditions / "swap").mkdir()
    (conditions / "swap" / "outage-at-start.toml").write_text(
        'name = "outage-at-start"\ndescription = "The assigned model is down from the first call; no substitute."\n'
        'unavailable_from_call = 0\non_unavailable = "refuse"\n'
    )
    task = next(iter(in_suite(load_tasks(), "default")))
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    out = tmp_path / "ledger"
    assert (
        main(
            [
                "run",
                "--venvs",
                str(plain_venvs),
                "--out",
                str(out),
                "--no-progress",
                "--tasks",
                task,
                "--content",
                content,
                "--conditions-dir",
                str(conditions),
                "--models",
                registry.default_models()[0],
            ]
        )
        == 0
    )
    (r,) = read_records(out / "runs.jsonl")
    assert r.truth["swap"] == "prevented"
    assert r.classification.swap == "prevented" and not r.classification.claimed
