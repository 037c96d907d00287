"""The one reader of a ledger folder: typed records, last wins per run id, the torn-last-line
rule, crafted lines refused in one line naming the file, the line and the field."""

import json

import pytest

from claimgrid.errors import DataError
from claimgrid.store import LedgerFolder, RunRecord, RunStore
from claimgrid.store.events import GatewayExchange, ProcessExit, ToolCall
from claimgrid.store.record import dump, read_records

CLASSIFICATION = {
    "claim_verdict": "consistent",
    "outcome": "PASS",
    "claim_vs_outcome": "TRUE_SUCCESS",
    "injection": "not applicable",
    "legitimate": "not applicable",
    "swap": "none",
    "process": "ok",
}


def _record(run_id: str, **over) -> dict:
    rec = {
        "run_id": run_id,
        "framework": "f",
        "task": "t",
        "content": "clean",
        "swap": "none",
        "model": "diligent",
        "classification": dict(CLASSIFICATION),
    }
    rec.update(over)
    return dump(RunRecord.model_validate(rec))


@pytest.fixture
def ledger(tmp_path):
    store = RunStore(tmp_path / "grid")
    store.create({"grid_id": "g", "command": "test"})
    return store


def _append(store: RunStore, rec: dict, events=()) -> None:
    store.write_evidence(rec["run_id"], {"events.jsonl": list(events)})
    store.append(rec)


def test_runs_are_typed_records_and_the_last_line_of_a_run_id_wins(ledger):
    _append(ledger, _record("a", repeat=0))
    _append(ledger, _record("b"))
    _append(ledger, _record("a", repeat=7))  # the run recorded again: this line is its record
    found = LedgerFolder(ledger.folder).read()
    assert [r.run_id for r in found.records] == ["a", "b"]  # the first line's place
    assert found.records[0].repeat == 7
    assert found.repeated == 1 and found.torn is None
    assert all(isinstance(r, RunRecord) for r in LedgerFolder(ledger.folder).runs())
    assert [n for n, _ in LedgerFolder(ledger.folder).lines()] == [1, 2, 3]
    assert [r.repeat for r in read_records(ledger.runs_path)] == [0, 0, 7]  # every line, in order


def test_a_torn_last_line_is_not_a_record_and_not_an_error(ledger):
    _append(ledger, _record("a"))
    with open(ledger.runs_path, "a") as fh:
        fh.write('{"run_id": "b", "classif')  # a kill mid-append
    found = LedgerFolder(ledger.folder).read()
    assert [r.run_id for r in found.records] == ["a"]
    assert found.torn is not None and found.torn.number == 2 and found.torn.size == len('{"run_id": "b", "classif')


def test_a_whole_last_record_without_its_newline_is_a_record(ledger):
    _append(ledger, _record("a"))
    ledger.runs_path.write_bytes(ledger.runs_path.read_bytes().rstrip(b"\n"))
    assert [r.run_id for r in LedgerFolder(ledger.folder).runs()] == ["a"]


def test_a_torn_line_before_the_last_is_damage_named_by_line(ledger):
    _append(ledger, _record("a"))
    with open(ledger.runs_path, "a") as fh:
        fh.write('{"run_id": "b", "classif\n')
    _append(ledger, _record("c"))
    with pytest.raises(DataError) as exc:
        LedgerFolder(ledger.folder).runs()
    assert str(exc.value).startswith(f"{ledger.runs_path}:2: not valid JSON")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"classification": {**CLASSIFICATION, "claim_verdict": "sort of"}}, "classification.claim_verdict"),
        ({"surprise": 1}, "surprise"),  # an unknown field
        ({"repeat": "zero"}, "repeat"),
        ({"classification": None}, "classification"),
    ],
)
def test_a_crafted_line_is_refused_in_one_line_naming_line_and_field(ledger, line, field):
    _append(ledger, _record("a"))
    crafted = {**_record("b"), **line}
    with open(ledger.runs_path, "a") as fh:
        fh.write(json.dumps(crafted) + "\n")
    with pytest.raises(DataError) as exc:
        LedgerFolder(ledger.folder).runs()
    assert exc.value.path == f"{ledger.runs_path}:2" and exc.value.field == field
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("run_id", ["../escape", ".hidden", "a/b", ""])
def test_a_run_id_that_is_no_folder_name_is_refused(ledger, run_id):
    with open(ledger.runs_path, "a") as fh:
        fh.write(json.dumps({**_record("x"), "run_id": run_id}) + "\n")
    with pytest.raises(DataError) as exc:
        LedgerFolder(ledger.folder).runs()
    assert str(exc.value).startswith(f"{ledger.runs_path}:1: field 'run_id'")
    with pytest.raises(DataError):
        LedgerFolder(ledger.folder).events(run_id)


def test_events_are_typed_per_kind_and_every_line_must_be_whole(ledger):
    events = [
        {"source": "gateway", "kind": "exchange", "call_index": 0, "status": 200},
        {"source": "tools", "kind": "tool_call", "tool": "read_file", "args": {"path": "a"}},
        {"source": "process", "kind": "exit", "exit_code": 0},
        {"source": "tools", "kind": "later_kind", "x": 1},
    ]
    _append(ledger, _record("a"), events)
    got = LedgerFolder(ledger.folder).events("a")
    assert [type(e) for e in got[:3]] == [GatewayExchange, ToolCall, ProcessExit]
    assert got[0].answered and got[1].arg_dict == {"path": "a"}
    assert [e.model_dump() for e in got] == events  # nothing lost, nothing guessed
    assert LedgerFolder(ledger.folder).event_dicts("a") == events
    with pytest.raises(FileNotFoundError):
        LedgerFolder(ledger.folder).events("never")


def test_meta_is_the_bounded_parse_of_meta_json(ledger):
    folder = LedgerFolder(ledger.folder)
    assert folder.meta()["grid_id"] == "g" and folder.has_runs() and folder.has_meta()
    folder.meta_path.write_text("[1, 2]")
    with pytest.raises(DataError) as exc:
        folder.meta()
    assert str(exc.value) == f"{folder.meta_path}: expected a JSON object"
    empty = LedgerFolder(ledger.folder / "nothing")
    assert empty.runs() == [] and not empty.has_runs()


def test_a_line_that_is_not_json_is_no_record_error(ledger):
    from claimgrid.store import RecordError

    _append(ledger, _record("a"))
    with open(ledger.runs_path, "a") as fh:
        fh.write('{"run_id": "b", "surprise": 1}\n{oops\n')
    with pytest.raises(DataError) as exc:
        LedgerFolder(ledger.folder).runs()
    assert not isinstance(exc.value, RecordError) and exc.value.path == f"{ledger.runs_path}:3"  # JSON first
    ledger.runs_path.write_text(ledger.runs_path.read_text().replace("{oops\n", ""))
    with pytest.raises(RecordError):
        LedgerFolder(ledger.folder).runs()


def test_the_known_events_are_one_union_tagged_by_source_and_kind():
    from typing import get_args

    from claimgrid.store.events import Event, KnownEvent, SourceEvent, parse_event

    tags = [(m.model_fields["source"].default, m.model_fields["kind"].default) for m in get_args(KnownEvent)]
    assert len(set(tags)) == len(tags) and all(isinstance(k, str) for _, k in tags)
    for model, (source, kind) in zip(get_args(KnownEvent), tags):
        assert type(parse_event({"source": source, "kind": kind})) is model
    for model in get_args(SourceEvent):  # a kind a later version adds: its source's generic model
        assert type(parse_event({"source": model.model_fields["source"].default, "kind": "later"})) is model
    assert type(parse_event({"source": "elsewhere", "kind": "x"})) is Event
