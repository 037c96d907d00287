"""The ledger's columns are declared once (claimgrid.ledger.columns): renaming one there renames
it in the loaded frame, ledger.html, runs.parquet and docs/ledger-readers.md's generated table, and a
page that still reads the old name fails naming it, never showing an empty column."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from claimgrid.commands import docs
from claimgrid.ledger import columns as spec
from claimgrid.ledger import load, render_ledger
from claimgrid.ledger.frame import PARQUET_NAME, read_frame
from claimgrid.store.record import RunRecord, dump

from tests.ledger_support import classification


def _ledger(folder):
    """Two runs of one cell on two frameworks, no evidence folders, no meta.json."""
    recs = [
        dump(
            RunRecord.model_validate(
                {"run_id": f"{fw}.t.clean.none.diligent.r0", "framework": fw, "task": "t", "content": "clean",
                 "swap": "none", "model": "diligent", "repeat": 0, "role": "coder", "timings": {"wall_s": 1.0},
                 "classification": classification(outcome="PASS", claim_vs_outcome="TRUE_SUCCESS",
                                                   claim_form="free text only", claimed=True)}
            )
        )
        for fw in ("fw-a", "fw-b")
    ]  # fmt: skip
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _renamed(monkeypatch, old: str, new: str) -> None:
    cols = tuple(dataclasses.replace(c, name=new) if c.name == old else c for c in spec.COLUMNS)
    assert cols != spec.COLUMNS, f"no column {old!r} to rename"
    monkeypatch.setattr(spec, "COLUMNS", cols)


def _viewer_data(folder) -> dict:
    html = (folder / "ledger.html").read_text()
    return json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S).group(1))


def test_every_column_is_declared_once_with_a_known_source():
    names = [c.name for c in spec.COLUMNS]
    assert len(names) == len(set(names))
    assert {c.origin for c in spec.COLUMNS} == {"record", "evidence", "ledger"}
    for c in spec.COLUMNS:
        assert c.explanation and c.viewer in (None, spec.COORDINATE, spec.FIELD), c
        if c.origin == "record":  # a record path the typed record declares
            assert c.path[0] in RunRecord.model_fields, c


def test_the_loaded_frame_has_exactly_the_declared_columns(tmp_path):
    ledger = load(_ledger(tmp_path))
    declared = [c.name for c in spec.loaded()]
    assert ledger.runs.columns[: len(declared)] == declared
    assert all(n.startswith(("extra.", "parity.")) for n in ledger.runs.columns[len(declared) :])


def test_a_renamed_classification_column_follows_into_frame_viewer_and_contracts(tmp_path, monkeypatch):
    folder = _ledger(tmp_path)
    render_ledger(folder)
    before_md = (folder / "LEDGER.md").read_text()
    assert "claim_form" in _viewer_data(folder)["columns"]
    assert docs.stale() == []

    _renamed(monkeypatch, "claim_form", "form_of_claim")
    assert "form_of_claim" in load(folder).runs.columns and "claim_form" not in load(folder).runs.columns
    render_ledger(folder)
    data = _viewer_data(folder)
    assert "form_of_claim" in data["columns"] and "claim_form" not in data["columns"]
    assert data["values"]["form_of_claim"] == ["free text only"]
    # LEDGER.md reads the field through the spec: the same ledger, naming the column by its new name
    after_md = (folder / "LEDGER.md").read_text()
    changed = [(a, b) for a, b in zip(before_md.splitlines(), after_md.splitlines(), strict=True) if a != b]
    assert changed and all(b == a.replace("claim_form", "form_of_claim") for a, b in changed)
    # docs/ledger-readers.md's generated table no longer matches the code: the docs test fails until regenerated
    assert docs.stale() == ["docs/ledger-readers.md: block 'parquet-columns' is out of date"]
    assert "`form_of_claim`" in docs.block("parquet-columns")


def test_a_renamed_evidence_column_follows_into_parquet(tmp_path, monkeypatch):
    folder = _ledger(tmp_path)
    _renamed(monkeypatch, "changed_files", "files_changed")
    render_ledger(folder)
    df, _ = read_frame(folder / PARQUET_NAME)
    assert "evidence.files_changed" in df.columns and "evidence.changed_files" not in df.columns
    assert docs.stale() == ["docs/ledger-readers.md: block 'parquet-columns' is out of date"]


@pytest.mark.parametrize("old", ["outcome", "swap_condition"])
def test_a_page_reading_a_renamed_column_fails_naming_it(tmp_path, monkeypatch, old):
    folder = _ledger(tmp_path)
    _renamed(monkeypatch, old, f"{old}_renamed")
    with pytest.raises(KeyError, match=old):
        render_ledger(folder)
    assert not (folder / "LEDGER.md").exists()  # nothing half-written
