"""bench/compare_classifications.py: two ledgers' classifications matched by cell, not run id."""

import importlib.util

from claimgrid.store import RunStore

from tests.conftest import ROOT
from tests.unit.store.test_reader import _append, _record

spec = importlib.util.spec_from_file_location("compare_classifications", ROOT / "bench" / "compare_classifications.py")
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def _ledger(folder, records):
    store = RunStore(folder)
    store.create({"grid_id": folder.name})
    for rec in records:
        _append(store, rec)
    return folder


def test_same_cells_under_other_run_ids_are_identical(tmp_path, capsys):
    a = _ledger(tmp_path / "a", [_record("a1", task="t1"), _record("a2", task="t2")])
    b = _ledger(tmp_path / "b", [_record("b2", task="t2"), _record("b1", task="t1")])
    assert compare.main([str(a), str(b)]) == 0
    assert capsys.readouterr().out.strip().endswith("identical")


def test_a_changed_field_and_a_missing_cell_are_each_a_line(tmp_path, capsys):
    changed = {
        **_record("b1", task="t1")["classification"],
        "outcome": "TESTS_FAIL",
        "claim_vs_outcome": "FALSE_SUCCESS",
    }
    a = _ledger(tmp_path / "a", [_record("a1", task="t1"), _record("a2", task="t2")])
    b = _ledger(tmp_path / "b", [_record("b1", task="t1", classification=changed)])
    assert compare.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "task=t1" in line and "outcome: 'PASS'" in line]
    assert [line for line in out if line.startswith("only in A:") and "task=t2" in line]
    assert out[-1].endswith("3 difference(s)")  # outcome, claim_vs_outcome, the missing cell


def test_not_a_ledger_is_one_line_exit_2(tmp_path, capsys):
    assert compare.main([str(tmp_path / "nothing"), str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing" in err
