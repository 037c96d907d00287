"""Tool tables: the abstract actions spelled in an agent's own tools (claimgrid.reference.tool_table)."""

from __future__ import annotations

import json
import shlex
import string

import pytest

from claimgrid import ROOT
from claimgrid.errors import DataError
from claimgrid.gateway.scripted import in_protocol
from claimgrid.inputs.venvs import load_venvs
from claimgrid.reference.policies import ToolCall, Turn
from claimgrid.reference.tool_table import load_table
from claimgrid.vocab import TOOL_NAMES


def _tables():
    """Every tool table venvs.toml names (no agent spelled here)."""
    return {name: load_table(e.tools_table) for name, e in load_venvs().items() if e.tools_table is not None}


def test_every_cli_entry_has_a_table_with_every_action():
    tables = _tables()
    assert tables, "venvs.toml has no kind = 'cli' entry with a tool table"
    for table in tables.values():
        assert set(table.actions) == set(TOOL_NAMES)


SPELLING_CASES = {
    "read_file": {"path": "dir with space/it's.py"},
    "edit_file": {"path": "a.py", "old": "x = '1'\n", "new": "x = 2\n"},
    "run_command": {"command": "python -m unittest discover -s tests"},
}


@pytest.mark.parametrize("name", sorted(_tables()))
def test_shell_spelling_quotes_arguments_and_keeps_commands(name):
    """A shell-quoted field (``{name}``) is one shell word of the value; a whole-argument raw
    field (``{name:raw}``: a command, or a path a file tool takes as it is) is the value as
    written; every spelled call reads back as the call it spells."""
    table = _tables()[name]
    for action, given in SPELLING_CASES.items():
        tool, args = table.spell(action, json.dumps(given))
        assert tool == table.actions[action].tool
        spelled = json.loads(args)
        for key, template in table.actions[action].arguments:
            for _, field, spec, _ in string.Formatter().parse(template):
                if field is None:
                    continue
                if template == f"{{{field}:raw}}":
                    assert spelled[key] == given[field], (action, key)  # as written
                elif spec == "raw":
                    assert given[field] in spelled[key], (action, key)
                else:
                    assert shlex.quote(given[field]) in spelled[key], (action, key)  # one word, quoted
                    assert given[field] in shlex.split(spelled[key]), (action, key)
        assert table.read_back(tool, args) == (action, given), action


def test_unknown_action_and_bad_json_are_sent_as_the_policy_wrote_them():
    table = next(iter(_tables().values()))
    assert table.spell("deploy_to_production", '{"environment": "production"}') == (
        "deploy_to_production",
        '{"environment": "production"}',
    )
    assert table.spell("read_file", '{"path": "TICKET.md"') == ("read_file", '{"path": "TICKET.md"')


def test_gateway_spells_calls_only_for_an_agent_with_a_table():
    from claimgrid.reference.script import RunScript

    table = next(iter(_tables().values()))
    turn = Turn(tool_calls=(ToolCall("call_0", "read_file", '{"path": "TICKET.md"}'),))
    script = object.__new__(RunScript)  # only the two protocol fields are read
    object.__setattr__(script, "final_answer", None)
    object.__setattr__(script, "tool_table", None)
    assert in_protocol(script, turn, 0) == turn
    object.__setattr__(script, "tool_table", table)
    (call,) = in_protocol(script, turn, 0).tool_calls
    assert (call.id, call.name) == ("call_0", table.actions["read_file"].tool)
    final = Turn(content="done")
    assert in_protocol(script, final, 1) == final


def test_bad_table_is_one_line_naming_the_field(tmp_path):
    base = (ROOT / "frameworks" / "codex" / "tools.toml").read_text()
    cases = {
        base.replace('cmd = "cat {path}"', 'cmd = "cat {paht}"'): "actions.read_file.arguments.cmd",
        base.replace(
            'category = "read"\narguments = { cmd = "cat', 'category = "bash"\narguments = { cmd = "cat'
        ): "actions.read_file.category",
        base.replace("[actions.run_command]", "[actions.run_shell]"): "actions.run_command",
    }
    for text, field in cases.items():
        assert text != base
        path = tmp_path / "tools.toml"
        path.write_text(text)
        with pytest.raises(DataError) as err:
            load_table(path)
        assert field in str(err.value) and "\n" not in str(err.value)


FINAL_TEXTS = ["Done.", 'It\'s "done": 100% of 3 tests\npass\\n — ✓ 完了', "", "$(rm -rf /) `id` %s %n"]


def _final_tables():
    return {name: t for name, t in _tables().items() if t.final is not None}


@pytest.mark.parametrize(
    "name",
    sorted(_final_tables())
    or [pytest.param(None, marks=pytest.mark.skip(reason="no venvs.toml tool table has a [final_answer]"))],
)
def test_a_final_text_is_sent_as_the_tables_final_call_and_reads_back(name):
    """An agent that ends only on a call: the gateway sends a policy's final text as the
    table's [final_answer] call, and that call reads back as the same text (the exchange's
    final_answer, the channel check's answer protocol); no other call reads as a final one."""
    from claimgrid.reference.script import RunScript

    table = _final_tables()[name]
    script = object.__new__(RunScript)
    object.__setattr__(script, "final_answer", None)
    object.__setattr__(script, "tool_table", table)
    for text in FINAL_TEXTS:
        (call,) = in_protocol(script, Turn(content=text), 3).tool_calls
        assert call.name == table.final[0]
        assert table.read_final(call.name, call.arguments) == text
    for action, given in SPELLING_CASES.items():
        tool, args = table.spell(action, json.dumps(given))
        assert table.read_final(tool, args) is None, action
    assert table.read_final(table.final[0], "not json") is None
    # A turn that is not final text (tool calls, or text marked not final) is not turned into it.
    assert in_protocol(script, Turn(content="thinking", final=False), 0) == Turn(content="thinking", final=False)


def test_a_bad_final_answer_template_is_one_line_naming_the_field(tmp_path):
    base = (ROOT / "frameworks" / "codex" / "tools.toml").read_text()
    for block, field in (
        ('[final_answer]\ntool = "exec_command"\narguments = { cmd = "echo {answr}" }\n', "final_answer.arguments.cmd"),
        ('[final_answer]\ntool = "not a tool"\narguments = { cmd = "echo {answer}" }\n', "final_answer.tool"),
        ('[final_answer]\ntool = "exec_command"\n', "final_answer.arguments"),
    ):
        path = tmp_path / "tools.toml"
        path.write_text(base + "\n" + block)
        with pytest.raises(DataError) as err:
            load_table(path)
        assert field in str(err.value) and "\n" not in str(err.value)
    path.write_text(base + '\n[final_answer]\ntool = "exec_command"\narguments = { cmd = "echo {answer}" }\n')
    table = load_table(path)
    assert table.read_final(*table.spell_final("a b")) == "a b"
