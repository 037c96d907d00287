"""Any bytes in a ledger's fields, every Markdown page inert (issue 51 item 5): generated field
values (lone surrogates, NUL, control and bidi characters, ANSI escapes, HTML) put into a real
small grid's records (the agent-derived claim phrase and agent name) and meta.json (the command)
render with no traceback, and LEDGER.md, DETAILS.md, RUNS.md and every RUN.md show them as text:
no raw HTML tag, no control or bidi character; both export formats write files a JSON reader
loads, with no field dropped for its encoding."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from claimgrid.commands.cli import main
from claimgrid.ledger import render_ledger
from claimgrid.ledger.exports import export_ledger

from tests.ledger_support import selection

HOSTILE = st.one_of(
    # every code point, lone surrogates included (st.characters leaves them out unless told)
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40),
    st.sampled_from(
        [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "\x1b[31mred\x1b[0m",
            "\u202eevil\u202c",
            "a\x00b",
            "\ud800\udfff lone",
            "<!-- c -->",
            "</table><b>x",
        ]
    ),
)
INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.fixture(scope="module")
def small_grid(tmp_path_factory, plain_venvs):
    sel = selection()
    out = tmp_path_factory.mktemp("any-bytes") / "grid"
    args = [
        "run",
        "--venvs",
        str(plain_venvs),
        "--out",
        str(out),
        "--tasks",
        sel["tasks"][0],
        "--content",
        sel["content"][0],
        "--swap",
        sel["swap"][0],
        "--models",
        ",".join(sel["models"][:2]),
        "--no-progress",
    ]
    assert main(args) == 0
    return out


def _pages(folder):
    return [folder / n for n in ("LEDGER.md", "DETAILS.md", "RUNS.md")] + sorted(folder.glob("runs/*/RUN.md"))


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(phrase=HOSTILE, agent=HOSTILE, command=HOSTILE)
@example(phrase="\ud800\udfff <script>alert(1)</script>", agent="ag\u202eent \udcff", command="\x1b[31m\x00<b>")
def test_generated_fields_render_as_inert_text(small_grid, tmp_path_factory, caplog, phrase, agent, command):
    folder = tmp_path_factory.mktemp("hostile") / "grid"
    shutil.copytree(small_grid, folder)
    for p in folder.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    lines = []
    for line in (folder / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["classification"]["claim_phrase"] = f"DONE {phrase}"
        rec["classification"]["agent"] = agent
        lines.append(json.dumps(rec))
    (folder / "runs.jsonl").write_text("\n".join(lines) + "\n")
    meta = json.loads((folder / "meta.json").read_text())
    meta["command"] = f"uv run grid.py {command}"
    (folder / "meta.json").write_text(json.dumps(meta))
    render_ledger(folder)  # no traceback, whatever the fields hold
    for page in _pages(folder):
        text = page.read_text(encoding="utf-8")
        without_anchors = re.sub(r'<a id="[\w-]+"></a>', "", text)
        assert not re.search(r"<[A-Za-z/!?]", without_anchors), (
            page.name,
            re.search(r"<[A-Za-z/!?].{0,30}", without_anchors),
        )
        assert not INVISIBLE.search(text), (page.name, INVISIBLE.search(text))
    # The claim phrase reaches RUN.md (the page that shows it), escaped, not dropped.
    if "<script>" in phrase:
        assert any("&lt;script>" in p.read_text() for p in _pages(folder))
    # Both export formats take the same fields: files a JSON reader loads, nothing dropped with
    # an encoding error logged (the OTLP exporter logs and drops what it cannot encode).
    caplog.clear()
    for fmt in ("inspect", "otel"):
        for path in export_ledger(folder, folder.parent / f"export-{fmt}", fmt):
            json.loads(path.read_text(encoding="utf-8"))
    assert not [r for r in caplog.records if "encode" in r.getMessage()], caplog.text[-2000:]


def _sealed_hostile(small_grid, folder, phrase, agent, command):
    """A copy of ``small_grid`` whose records and meta carry the generated values, sealed again
    with the session's publisher key, so every reader takes it as it takes a published ledger."""
    from claimgrid.store import RunStore
    from claimgrid.store.seal import load_key

    shutil.copytree(small_grid, folder)
    for p in folder.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    recs = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines() if line.strip()]
    for rec in recs:
        rec["classification"]["claim_phrase"] = f"DONE {phrase}"
        rec["classification"]["agent"] = agent
    meta = json.loads((folder / "meta.json").read_text())
    meta["command"] = f"uv run grid.py {command}"
    store = RunStore(folder, load_key(None, ledger=folder))
    store.rewrite(recs)
    store.write_meta(meta)


@settings(max_examples=4, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(phrase=HOSTILE, agent=HOSTILE, command=HOSTILE)
@example(phrase="\ud800\udfff <script>alert(1)</script>", agent="ag\u202eent \udcff", command="\x1b[31m\x00<b>")
def test_every_command_reads_generated_fields_without_a_traceback(
    small_grid, tmp_path_factory, capsys, phrase, agent, command
):
    base = tmp_path_factory.mktemp("hostile-cli")
    folder = base / "grid"
    _sealed_hostile(small_grid, folder, phrase, agent, command)
    commands = [
        ["report", str(folder)],
        ["compare", str(small_grid), str(folder), "--out", str(base / "compare")],
        ["export", str(folder), "--format", "inspect", "--out", str(base / "inspect")],
        ["export", str(folder), "--format", "otel", "--out", str(base / "otel")],
        ["check-ledger", str(folder)],
        ["reclassify", str(folder)],
    ]
    for argv in commands:
        code = main(argv)  # an exception here is the traceback a user would see
        assert code in (0, 1), (argv, code, capsys.readouterr())
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out  # no escape sequence or bidi control reached the terminal
