"""The run store: a line means its evidence is complete; a torn tail and orphan folders are repaired."""

import json
import os

import pytest

from claimgrid.execute.cells import Cell, plan
from claimgrid.execute.spec import Selection
from claimgrid.store import RunStore, StoreIntegrityError


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "grid")
    s.create({"grid_id": "g"})
    return s


def test_evidence_is_write_once_with_a_manifest(store):
    folder = store.write_evidence("r1", {"events.jsonl": [{"source": "process", "kind": "exit"}], "diff.patch": "x"})
    assert store.verify_manifest("r1") == []
    assert not os.access(folder / "diff.patch", os.W_OK) or os.geteuid() == 0
    assert oct((folder / "diff.patch").stat().st_mode & 0o777) == "0o444"
    (folder / "diff.patch").chmod(0o644)
    (folder / "diff.patch").write_text("tampered")
    assert store.verify_manifest("r1") == ["tampered diff.patch"]
    assert store.load_events("r1") == [{"source": "process", "kind": "exit"}]


def test_repair_drops_a_torn_line_and_orphan_evidence(store):
    store.write_evidence("done", {"events.jsonl": []})
    store.append({"run_id": "done", "classification": {}})
    store.write_evidence("orphan", {"events.jsonl": []})  # killed before its line was appended
    with open(store.runs_path, "a") as fh:
        fh.write('{"run_id": "torn", "classif')  # killed mid-line
    assert store.completed_ids() == {"done"}
    store.repair()
    assert store.runs_path.read_text().endswith("}\n")
    assert [p.name for p in store.runs_dir.iterdir()] == ["done"]
    store.append({"run_id": "next"})
    assert [r["run_id"] for r in store.records()] == ["done", "next"]


def test_plan_ids_are_unique_and_stable():
    cells = plan(
        Selection(
            frameworks=["a", "b"],
            tasks=["t1", "t2"],
            content=["clean", "malicious"],
            swap=["none", "silent"],
            models=["diligent", "openai/gpt-4o-mini"],
            substitute="reader",
            repeats=2,
        )
    )
    ids = [c.run_id for c in cells]
    assert len(ids) == len(set(ids)) == 2 * 2 * 2 * 2 * 2 * 2
    assert (
        Cell("a", "t1", "clean", "none", "openai/gpt-4o-mini", "reader", 0).run_id
        == "a.t1.clean.none.openai-gpt-4o-mini.sub-reader.r0"
    )
    assert json.dumps(cells[0].as_dict())


def test_one_torn_line_rule_for_runs_and_events(tmp_path):
    from claimgrid.errors import DataError
    from claimgrid.store.lines import read_events, read_runs, scan_runs

    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"run_id": "a"}\n\n{"run_id": "b", "classif')  # a kill mid-append
    found = read_runs(runs)
    assert [n for n, _ in found.lines] == [1] and (found.torn.number, found.torn.size) == (3, 24)
    runs.write_text('{"run_id": "a"}\n{"run_id": "b"}')  # a whole record, only its newline lost
    assert [r["run_id"] for r in read_runs(runs).values] == ["a", "b"] and read_runs(runs).torn is None
    runs.write_text('{"run_id": "a"}\n{"run_id": "b", "cla\n{"run_id": "c"}\n[1]\n')  # edited, not killed
    assert scan_runs(runs).bad == [
        (2, "not valid JSON (Unterminated string starting at)"),
        (4, "expected a JSON object"),
    ]
    with pytest.raises(DataError, match=r"runs.jsonl:2: not valid JSON"):
        read_runs(runs)
    assert read_runs(tmp_path / "absent.jsonl").lines == []

    events = tmp_path / "events.jsonl"
    events.write_text('{"source": "process"}\n{"source": "gat')  # written whole and renamed: never torn by a kill
    with pytest.raises(DataError, match=r"events.jsonl:2: not valid JSON"):
        read_events(events)
    events.write_text('{"source": "process"}\n{"source": "gateway"}')
    assert read_events(events) == [{"source": "process"}, {"source": "gateway"}]
    with pytest.raises(FileNotFoundError):
        read_events(tmp_path / "gone.jsonl")


def test_a_bad_middle_line_is_a_problem_by_number_and_never_repaired(store):
    store.append({"run_id": "a"})
    with open(store.runs_path, "a") as fh:
        fh.write("{oops\n")
    store.append({"run_id": "b"})
    with open(store.runs_path, "a") as fh:
        fh.write('{"run_id": "c", "cl')  # and a torn last line
    store.write_evidence("orphan", {"events.jsonl": []})
    before = store.runs_path.read_bytes()
    with pytest.raises(StoreIntegrityError, match="runs.jsonl line 2: not a JSON run record"):
        store.repair()  # nothing is changed: not the torn tail, not the orphan folder
    assert store.runs_path.read_bytes() == before and (store.runs_dir / "orphan").is_dir()
    assert store.scan()[1] == [
        "runs.jsonl line 2: not a JSON run record: not valid JSON (Expecting property name enclosed in double quotes)"
    ]
