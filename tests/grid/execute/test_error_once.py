"""The conformance rule "each failure is recorded once" (tests/error_events.py) fails on an
adapter that records a failure its framework reported and then raised twice, and holds for the
same adapter on the kit's ``RunErrors`` (tests/fixtures/frameworks/doublerror): one gateway
fault each, through ``grid.py run`` on the ``plain`` venv."""

from __future__ import annotations

import json

from claimgrid.commands.cli import main
from claimgrid.reference.gateway_faults import gateway_faults
from claimgrid.store.record import read_records

from tests.conftest import ROOT
from tests.error_events import duplicate_errors

FIXTURE = ROOT / "tests" / "fixtures" / "frameworks" / "doublerror"
# A gateway fault the plain loop raises on (found by its refusal status, not named).
FAULT = next(name for name, f in sorted(gateway_faults().items()) if f.kind == "server_error")


def test_a_failure_recorded_twice_fails_the_rule_and_the_kit_records_it_once(tmp_path):
    venvs = tmp_path / "venvs.toml"
    venvs.write_text(
        "".join(
            f'[frameworks.{name}]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
            f'adapter = "{FIXTURE}/adapter.py"\nenv = {{ DOUBLERROR_RECORD = "{mode}" }}\n'
            for name, mode in (("twice", "twice"), ("once", "once"))
        )
    )
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
                FAULT,
                "--content",
                "clean",
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
    runs = {r.framework: r for r in read_records(out / "runs.jsonl")}
    assert set(runs) == {"twice", "once"}
    for name, r in runs.items():
        events = [json.loads(x) for x in (out / r.evidence_dir / "events.jsonl").read_text().splitlines()]
        errors = [e for e in events if e["source"] == "runtime" and e["kind"] == "error"]
        assert r.classification.process == "adapter_error", (name, r.classification)
        if name == "twice":
            assert len(errors) == 2 and len(duplicate_errors(events)) == 1, errors
        else:
            assert len(errors) == 1 and duplicate_errors(events) == [], errors
