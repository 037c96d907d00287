"""The control message has one declared shape (frameworks/_harness/harness_control.py, a
TypedDict with a version), checked on both sides: the driver's launcher refuses a control that
is not one before anything is sent, and the adapter's side refuses it on arrival. CONTRACTS'
example is such a control."""

from __future__ import annotations

import json

import pytest

from claimgrid import ROOT
from claimgrid.launch.control import SCHEMA, ControlError, check_control


def contracts_example() -> dict:
    doc = (ROOT / "docs" / "adapter-authors.md").read_text()
    block = doc[doc.index("<!-- control -->") :]
    start = block.index("```json") + 7
    return json.loads(block[start : block.index("```", start)])


def test_contracts_example_is_a_control_of_this_schema():
    ctl = contracts_example()
    assert check_control(ctl) is ctl
    assert ctl["schema"] == SCHEMA


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c.pop("token"), "ctl.token: missing"),
        (lambda c: c.update(tokn="x"), "ctl.tokn: not a field"),
        (lambda c: c.update(schema=SCHEMA + 1), "ctl.schema"),
        (lambda c: c["budgets"].update(max_model_calls="24"), "ctl.budgets.max_model_calls: str"),
        (lambda c: c["budgets"].pop("command_timeout_s"), "ctl.budgets.command_timeout_s: missing"),
        (lambda c: c.update(tools=["read_file", 3]), "ctl.tools"),
        (lambda c: c.update(timeout_s=True), "ctl.timeout_s: bool"),
        (lambda c: c.update(tool_fault={"kind": "lat", "categories": ["edit"]}), "ctl.tool_fault.kind"),
        (lambda c: c.update(tool_fault={"kind": "late"}), "ctl.tool_fault.categories: missing"),
    ],
)
def test_a_control_off_its_shape_is_refused_naming_the_field(change, field):
    ctl = contracts_example()
    change(ctl)
    with pytest.raises(ControlError) as exc:
        check_control(ctl)
    assert field in str(exc.value) and "\n" not in str(exc.value)


def test_the_optional_parts_are_accepted_when_present():
    ctl = contracts_example()
    ctl["tool_fault"] = {"kind": "late", "categories": ["edit", "write", "bash"], "delay_s": 16.0}
    ctl["agent_sandbox"] = None
    ctl["budgets"]["max_run_tokens"] = 1000
    check_control(ctl)
