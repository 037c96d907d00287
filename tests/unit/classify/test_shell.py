"""The one shell-command parser every agent's shell is read with (claimgrid/classify/shell.py):
each read form names the file and the lines it prints, each change form the paths it changes,
and a command it cannot split is unknown; a wrapped shell output is unwrapped for the coverage
rule, which then counts a review read through mini-swe-agent's JSON observation."""

from __future__ import annotations

import json

import pytest

from claimgrid.classify.evidence import opened_files, read_coverage
from claimgrid.classify.shell import command_output, shell_effects

F = "app/calc.py"

READS = [
    ("cat app/calc.py", (1, None, False)),
    ("cat -n app/calc.py", (1, None, False)),
    ("nl -ba app/calc.py", (1, None, False)),
    ("nl -b a app/calc.py", (1, None, False)),
    ("less app/calc.py", (1, None, False)),
    ("grep -n '' app/calc.py", (1, None, False)),
    ("tail -n +1 app/calc.py", (1, None, False)),
    ("git show HEAD:app/calc.py", (1, None, False)),
    ("sed -n '1,80p' app/calc.py", (1, 80, False)),
    ("sed -n 5p app/calc.py", (5, 5, False)),
    ("awk 'NR<=80' app/calc.py", (1, 80, False)),
    ("awk 'NR>=3 && NR<=9' app/calc.py", (3, 9, False)),
    ("awk 'NR==3,NR==9' app/calc.py", (3, 9, False)),
    ("head -n 1000 app/calc.py", (1, 1000, False)),
    ("head -40 app/calc.py", (1, 40, False)),
    ("tail -n +20 app/calc.py", (20, None, False)),
    ("nl -ba app/calc.py | sed -n '150,180p'", (150, 180, False)),
    ("cat -n app/calc.py | head -50", (1, 50, False)),
    ("cd /repo && cat -n app/calc.py | head -50", (1, 50, False)),
    ("bash -lc 'nl -ba app/calc.py'", (1, None, False)),
    ("grep -n add app/calc.py", (1, None, True)),
    ("tail -n 5 app/calc.py", (1, None, True)),
    ("git diff -- app/calc.py", (1, None, True)),
    ("git show HEAD -- app/calc.py", (1, None, True)),
]


@pytest.mark.parametrize(("command", "span"), READS, ids=[c for c, _ in READS])
def test_each_read_form_names_the_file_and_its_lines(command, span):
    e = shell_effects(command)
    assert e.category == "read" and not e.changes, e
    assert [(r.path, r.first, r.last, r.partial) for r in e.reads] == [(F, *span)]
    assert e.reads[0].whole == (span == (1, None, False))


CHANGES = [
    ("echo x > app/calc.py", "write", ["app/calc.py"]),
    ("printf 'x' >> app/calc.py", "edit", ["app/calc.py"]),
    ("sed -i 's/a - b/a + b/' app/calc.py", "edit", ["app/calc.py"]),
    ("sed -i.bak -e 's/a/b/' app/calc.py", "edit", ["app/calc.py"]),
    ("cat new.txt | tee app/calc.py", "write", ["app/calc.py"]),
    ("rm app/calc.py", "edit", ["app/calc.py"]),
    ("mv app/calc.py app/calc2.py", "edit", ["app/calc.py", "app/calc2.py"]),
    ("cp /tmp/x app/calc.py", "write", ["app/calc.py"]),
    ("git checkout -- app/calc.py", "edit", ["app/calc.py"]),
    ("git apply fix.diff", "edit", ["?"]),
    ("cat <<'EOF' > app/calc.py\ndef add(a, b):\n    return a + b\nEOF", "write", ["app/calc.py"]),
    (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: app/calc.py\n@@\n-a\n+b\n*** End Patch\nEOF",
        "edit",
        ["app/calc.py"],
    ),
    ("bash -lc \"sed -i 's/a/b/' app/calc.py\"", "edit", ["app/calc.py"]),
    ("python -m pytest -q > /dev/null", "bash", []),
]


@pytest.mark.parametrize(("command", "category", "paths"), CHANGES, ids=[c.split("\n")[0] for c, _, _ in CHANGES])
def test_each_change_form_names_what_it_changes(command, category, paths):
    e = shell_effects(command)
    assert (e.category, list(e.changes)) == (category, paths), e


def test_what_it_cannot_split_is_unknown_never_guessed():
    for command in ('cat "app/calc.py', "", "   "):
        e = shell_effects(command)
        assert (e.parsed, e.category, e.reads, e.changes) == (False, "bash", (), ())
    assert shell_effects("ls -la && wc -l app/calc.py").category == "read"  # lists: a read, of no file's lines
    assert shell_effects("python3 reproduce.py").category == "bash"


TEXT = "".join(f"line {n} of the file\n" for n in range(1, 41))


def _call(result: str) -> dict:
    return {
        "source": "tools",
        "kind": "tool_call",
        "tool": "run_command",
        "ok": True,
        "changed_workspace": False,
        "args": {"command": f"nl -ba {F}"},
        "result": result,
    }


def test_a_json_wrapped_shell_output_is_unwrapped_for_the_coverage_rule():
    numbered = "".join(f"{n:6}\tline {n} of the file\n" for n in range(1, 41))
    mini = json.dumps({"returncode": 0, "output": numbered})  # mini-swe-agent's observation
    assert command_output(mini) == numbered
    assert command_output(json.dumps({"returncode": 0, "output_head": "a", "output_tail": "b"})) == "a\nb"
    assert command_output("plain text") == "plain text"
    assert command_output('{"not": "an output"}') == '{"not": "an output"}'
    printed = json.dumps({"output": "a file's own field", "returncode": 0, "name": "x"})  # cat of a JSON file
    assert command_output(printed) == printed
    assert read_coverage([_call(mini)], {F: TEXT})[F]["coverage"] == 1.0
    assert F in opened_files([_call(mini)], {F: TEXT})
    # one numbered line of forty: a partial read, recorded, not a read
    one = json.dumps({"returncode": 0, "output": "     1\tline 1 of the file\n"})
    assert 0 < read_coverage([_call(one)], {F: TEXT})[F]["coverage"] < 0.8
    assert F not in opened_files([_call(one)], {F: TEXT})


def test_claude_codes_numbered_read_output_counts_by_its_lines():
    """Claude Code's Read numbers lines as ``cat -n`` does with an arrow for the tab: a read with
    an offset (which its tool table cannot spell as the harness's read_file) counts by coverage."""
    arrowed = "".join(f"{n:6}\u2192line {n} of the file\n" for n in range(1, 41))
    assert read_coverage([_call(arrowed)], {F: TEXT})[F]["coverage"] == 1.0
