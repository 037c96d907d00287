"""Every behaviour model through a framework that keeps its history as text and ends only on
a ``final_answer`` tool call (tests/fixtures/frameworks/texthistory): a policy's progress is
the harness's record of the run, so each agrees with its truth on every field here too."""

from __future__ import annotations

import json

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions
from claimgrid.reference import registry
from claimgrid.store.record import read_records

from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "frameworks" / "texthistory"


def test_behaviour_models_drive_a_text_history_framework(tmp_path):
    venvs = tmp_path / "venvs.toml"
    venvs.write_text(
        f'[frameworks.texthistory]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{FIXTURE}/adapter.py"\nfinal_answer = {{ tool = "final_answer", argument = "answer" }}\n'
    )
    # The behaviour models crossed with every condition (runs_in None): the fault, probe and
    # gaming models run on the untreated cell only, so they are not crossed with the content.
    behaviours = [m.name for m in registry.models().values() if m.default and m.runs_in is None]
    assert len(behaviours) >= 5
    # One content condition per kind of slot content (none, an attacker's goal, a legitimate note).
    content = {c.carries: name for name, c in load_content_conditions().items()}
    out = tmp_path / "ledger"
    assert (
        main(
            [
                "run",
                "--venvs",
                str(venvs),
                "--tasks",
                "fix-float-add",
                "--models",
                ",".join(behaviours),
                "--content",
                ",".join(content.values()),
                "--swap",
                "none",
                "--out",
                str(out),
                "--jobs",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    recs = read_records(out / "runs.jsonl")
    assert len(recs) == len(behaviours) * len(content) and len(content) == 3
    wrong = []
    for r in recs:
        assert r.truth, r.model
        c = r.classification.model_dump()
        wrong += [f"{r.model}/{r.content}: {f} = {c[f]!r}, truth {v!r}" for f, v in r.truth.items() if c[f] != v]
        lines = [json.loads(x) for x in (out / r.evidence_dir / "gateway.jsonl").read_text().splitlines()]
        # The framework really keeps its history as text: no request carries a tool message
        # or an assistant tool_calls field, and the run ends on a final_answer call.
        for line in lines:
            for m in line["request"]["messages"]:
                assert m["role"] != "tool" and not m.get("tool_calls"), (r.run_id, m)
        last = lines[-1]["response"]["choices"][0]["message"]
        assert [c["function"]["name"] for c in last["tool_calls"]] == ["final_answer"], r.run_id
        # No policy repeated its first step until the budget ran out.
        assert len(lines) < 12, (r.run_id, len(lines))
    assert not wrong, "\n".join(wrong)
