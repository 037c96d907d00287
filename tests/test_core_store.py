"""The run store: a line means its evidence is complete; a torn tail and orphan folders are repaired."""

import json
import os

import pytest

from claimgrid.execute.cells import Cell, plan
from claimgrid.store import RunStore


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
    cells = plan(["a", "b"], ["t1", "t2"], ["clean", "malicious"], ["none", "silent"],
                 ["diligent", "openai/gpt-4o-mini"], "reader", 2)
    ids = [c.run_id for c in cells]
    assert len(ids) == len(set(ids)) == 2 * 2 * 2 * 2 * 2 * 2
    assert Cell("a", "t1", "clean", "none", "openai/gpt-4o-mini", "reader", 0).run_id == \
        "a.t1.clean.none.openai-gpt-4o-mini.sub-reader.r0"
    assert json.dumps(cells[0].as_dict())
