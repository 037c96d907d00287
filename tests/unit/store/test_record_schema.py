"""CONTRACTS' record schema is generated from the pydantic model: it cannot drift."""

import json
import re

import pytest

from claimgrid import vocab
from claimgrid.errors import DataError
from claimgrid.ledger import names
from claimgrid.store.record import SCHEMA_BEGIN, SCHEMA_END, Classification, parse_record, schema_markdown

from tests.conftest import ROOT


def test_contracts_carries_the_generated_schema():
    doc = (ROOT / "docs" / "ledger-readers.md").read_text()
    block = doc[doc.index(SCHEMA_BEGIN) : doc.index(SCHEMA_END) + len(SCHEMA_END)]
    assert block == schema_markdown(), "run `uv run python -m claimgrid.store.record` and commit docs/ledger-readers.md"


def test_every_vocabulary_value_is_documented_in_contracts():
    doc = (ROOT / "docs" / "ledger-readers.md").read_text()
    for literal in vocab.FIELDS.values():
        for value in vocab.values(literal):
            assert f"`{value}`" in doc, value


def test_the_ledger_names_are_the_vocabulary():
    assert names.CLAIM_VERDICT == list(vocab.CLAIM_VERDICT)
    assert names.INJECTION == list(vocab.INJECTION)
    assert names.CLAIMED == vocab.CLAIMED
    assert set(names.CLASSIFICATION_KEYS) <= set(Classification.model_fields)


def test_an_unknown_value_is_one_line_naming_the_field():
    rec = {
        "run_id": "r",
        "framework": "f",
        "task": "t",
        "content": "c",
        "swap": "s",
        "model": "m",
        "classification": {
            "claim_verdict": "sort of",
            "outcome": "PASS",
            "claim_vs_outcome": "TRUE_SUCCESS",
            "injection": "not applicable",
            "legitimate": "not applicable",
            "swap": "none",
            "process": "ok",
        },
    }
    with pytest.raises(DataError) as exc:
        parse_record(rec, "runs.jsonl:3")
    assert "runs.jsonl:3" in str(exc.value) and "classification.claim_verdict" in str(exc.value)
    rec["classification"]["claim_verdict"] = "consistent"
    assert parse_record(rec, "x").classification.declarations is None  # older record: not recorded


def test_a_taken_reference_model_name_is_an_error_naming_both_files(tmp_path):
    from claimgrid.errors import ClaimgridError
    from claimgrid.reference.registry import load_policies, models

    clash = tmp_path / "clash.py"
    clash.write_text(
        "from claimgrid.reference.policies import DILIGENT, register_behaviour\n"
        "register_behaviour('diligent', DILIGENT, 'a second diligent')\n"
    )
    with pytest.raises(ClaimgridError) as exc:
        load_policies(clash)
    assert str(exc.value) == f"{clash}: reference model 'diligent' is already defined by claimgrid"
    assert models()["diligent"].origin == "claimgrid"


def test_a_record_of_the_previous_release_reads_and_every_field_is_declared():
    from claimgrid.store.record import RunRecord, dump, read_records

    path = ROOT / "tests" / "fixtures" / "previous_release_runs.jsonl"  # a line the previous release wrote
    raw = json.loads(path.read_text())
    (rec,) = read_records(path)
    # Nothing lost; a field it did not write reads None (the decided phrase and language, read coverage, the
    # final-answer tool, the probe handling, an agent's own tools and its final-answer call, a
    # local model's server facts came later).
    c = raw["classification"]
    later = {**c, "claim_phrase": None, "claim_language": None, "evidence": {**c["evidence"], "read_coverage": None}}
    assert "format_version" not in raw  # version 1, upgraded on read (claimgrid.store.upgrade)
    assert dump(rec) == {
        **raw,
        "format_version": 2,
        "limits": None,
        "limit_hits": None,
        "node": None,
        "classification": later,
        "parity": {**raw["parity"], "model_server": None},
        "facts": {**raw["facts"], "final_answer_tool": None, "own_tools": None, "final_answer_call": None},
        "faults": {**raw["faults"], "handling": None, "handling_evidence": None},
    }
    assert set(raw) <= set(RunRecord.model_fields)
    for model, where in ((raw, "surplus"), (raw["parity"], "parity.surplus"), (raw["faults"], "faults.surplus")):
        model["surplus"] = 1
        with pytest.raises(DataError, match=rf"field '{re.escape(where)}'"):
            parse_record(raw, "runs.jsonl:1")
        del model["surplus"]
