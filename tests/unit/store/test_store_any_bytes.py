"""Any text in a run's evidence and record: the store writes it, reads it back unchanged
(JSON files) or shows it visibly (text files), its manifest checks, and the pages render
(Hypothesis; the example count is the profile's, tests/conftest.py)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from claimgrid.anybytes import utf8
from claimgrid.store import RunStore

ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60)
_ids = itertools.count()


@given(final=ANY_TEXT, arg=ANY_TEXT, path=st.binary(min_size=1, max_size=20), out=ANY_TEXT)
def test_any_text_is_stored_and_read_back(tmp_path_factory, final, arg, path, out):
    store = RunStore(tmp_path_factory.mktemp("store") / "grid")
    store.create({"grid_id": "g", "command": "grid.py run " + arg})
    run_id = f"r{next(_ids)}"
    name = path.decode("utf-8", errors="surrogateescape")  # how a file name reaches the harness
    events = [
        {"source": "agent", "kind": "report", "text": final, "trace": None},
        {
            "source": "tools",
            "kind": "tool_call",
            "tool": "write_file",
            "args": {"path": name, "content": arg},
            "changed_paths": [name],
            "result": out,
        },
        {"source": "verifier", "kind": "diff", "files": [{"path": name, "status": "A"}]},
    ]
    store.write_evidence(
        run_id,
        {
            "events.jsonl": events,
            "transcript.json": {"final_text": final},
            "test_output.txt": out,
            "stderr.txt": final,
            "diff.patch": name,
        },
    )
    store.append({"run_id": run_id, "classification": {"note": final}, "args": {name: arg}})
    assert store.load_events(run_id) == events  # lossless
    [record] = store.records()
    assert record["classification"]["note"] == final and record["args"] == {name: arg}
    assert store.check_integrity() == []
    folder = store.runs_dir / run_id
    assert (folder / "test_output.txt").read_bytes() == utf8(out)
    assert (folder / "diff.patch").read_bytes() == path  # a byte name comes back as its bytes
    assert store.read_meta()["command"] == "grid.py run " + arg
