"""The typed grid shapes (claimgrid.execute.spec): a spec compares with a stored one field by
field, meta.json round-trips through GridMeta with exactly its keys, and a wrong value is
refused before it is written."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from claimgrid.execute.spec import (
    RESUME_MAY_CHANGE,
    Budget,
    CellResult,
    CellStatus,
    DataDirs,
    GridMeta,
    GridReport,
    GridSpec,
    Selection,
)
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.reference import registry

from tests.conftest import ROOT


def _spec(**changes) -> GridSpec:
    content, swap = sorted(load_content_conditions())[:1], sorted(load_swap_conditions())[:1]
    sel = Selection(
        frameworks=["a", "b"],
        tasks=["t1", "t2"],
        content=content,
        swap=swap,
        models=registry.default_models()[:2],
        substitute=registry.default_substitute(),
        repeats=1,
    )
    data = DataDirs(
        tasks_dir=str(ROOT / "tasks"), conditions_dir=str(ROOT / "conditions"), venvs=str(ROOT / "venvs.toml")
    )
    return GridSpec(selection=sel, data=data).model_copy(update=changes)


def test_a_spec_is_frozen_and_reads_back_from_the_meta_it_writes():
    spec = _spec(timeout_s=7.0, budget=Budget(max_tokens=10))
    with pytest.raises(ValidationError):
        spec.timeout_s = 8.0
    meta = {"grid_id": "g", "jobs": 1, **spec.meta()}
    assert GridSpec.from_meta(json.loads(json.dumps(meta)), spec.data) == spec


def test_a_stored_selection_without_a_suite_reads_as_the_default_suite():
    meta = {"grid_id": "g", "jobs": 1, **_spec().meta()}
    del meta["selection"]["suite"]
    assert GridSpec.from_meta(meta, _spec().data).selection.suite == "default"


def test_differs_from_names_the_first_field_a_resume_may_not_change():
    stored = _spec()
    same_names = stored.selection.model_copy(update={"tasks": ("t2", "t1")})
    assert _spec(selection=same_names).differs_from(stored) is None  # names compare as sets
    other = stored.selection.model_copy(update={"repeats": 2})
    assert _spec(selection=other).differs_from(stored) == "selection.repeats"
    assert _spec(timeout_s=9.0).differs_from(stored) == "timeout_s"
    assert _spec(isolation="fresh").differs_from(stored) == "isolation"
    # what a resume may give anew (a higher budget after a stop, the guard of this invocation, ...)
    assert _spec(budget=Budget(max_cost_usd=5.0), guard_mode="off", verify_cache=False).differs_from(stored) is None
    assert RESUME_MAY_CHANGE < set(GridSpec.model_fields)


def test_meta_round_trips_with_exactly_its_keys_and_refuses_a_wrong_value():
    old = {
        "grid_id": "old",
        "selection": _spec().selection.model_dump(mode="json"),
        "timeout_s": 120.0,
        "jobs": 2,
        "isolation": "warm",
        "max_model_calls": 24,
        "unknown_later_key": {"x": 1},
    }
    meta = GridMeta.model_validate(old)
    assert meta.dump() == old  # nothing filled in, nothing dropped
    meta.add_report(
        GridReport(harness_errors=[{"run_id": "r", "error": "E"}], retries={"a": {"v": 1}}, gateway_cpu_s=0.25)
    )
    meta.add_report(GridReport(retries={"a": {"v": 2}}, gateway_cpu_s=0.25))
    dumped = meta.dump()
    assert dumped["harness_errors"] == [{"run_id": "r", "error": "E"}]
    assert dumped["retries"] == {"a": {"v": 1}}  # the first versions seen stay
    assert dumped["cpu"] == {"gateway_thread_s": 0.5}
    with pytest.raises(ValidationError):
        meta.timeout_s = -1
    with pytest.raises(ValidationError):
        GridMeta.model_validate({**old, "isolation": "lukewarm"})


def test_a_cell_result_says_how_the_run_ended_without_sentinel_strings():
    assert CellResult.done({"run_id": "r"}, {}).status is CellStatus.DONE
    assert CellResult.harness_error("E: x").error == "E: x"
    assert CellResult.not_started().record is None and CellResult.interrupted().status is CellStatus.INTERRUPTED
