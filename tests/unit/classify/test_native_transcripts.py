"""The native transcript readers behind ``read_transcript`` (claimgrid/classify/transcripts/) and
the recorded verdicts of ``check --outcome-from`` (claimgrid/classify/outcomes.py), on the
committed fixtures (tests/fixtures/transcripts/README.md: real transcripts with their
provenance, and minimal files for each form and edge case): each form told apart by content,
its tools mapped by the one table and shell commands by the one parser, tool errors kept,
sidechains attributed, a torn or mid-stream file read as far as it goes and saying so."""

from __future__ import annotations

import json
import shutil

import pytest

from claimgrid.classify.outcomes import read_outcome
from claimgrid.classify.transcripts import FORMS, read_transcript, tool_table
from claimgrid.commands.cli import main
from claimgrid.errors import DataError

from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "transcripts"
MIN = FIX / "minimal"


def _calls(t):
    return [(e["agent_tool"], e["category"], e["ok"], e.get("subagent")) for e in t.tool_events]


# file -> (form, agent, models, calls, final report starts, truncated reason starts (None: whole))
CASES = {
    "claude-code.stream.jsonl": (
        "claude-code stream-json",
        "claude-code",
        ["claude-sonnet-4-5", "claude-haiku-4-5"],
        [
            ("Read", "read", True, None),
            ("Task", "delegate", True, None),
            ("Bash", "read", True, "t2"),
            ("Edit", "edit", False, None),
            ("Bash", "edit", True, None),
        ],
        "Fixed add() in app/calc.py",
        None,
    ),
    "claude-code.session.jsonl": (
        "claude-code session",
        "claude-code",
        ["claude-opus-4-1", "claude-haiku-4-5"],
        [("Bash", "read", True, None), ("Write", "write", True, "ag1"), ("Bash", "bash", True, "b7")],
        "I have not changed anything yet",
        None,
    ),
    "claude-code.torn.jsonl": (
        "claude-code stream-json",
        "claude-code",
        ["claude-sonnet-4-5", "claude-haiku-4-5"],
        [("Read", "read", True, None), ("Task", "delegate", True, None), ("Bash", "read", True, "t2")],
        None,
        "line 10 is torn",
    ),
    "codex.exec.jsonl": (
        "codex exec json",
        "codex",
        [],
        [("shell", "read", True, None), ("apply_patch", "edit", True, None)],
        "Done: add() now adds.",
        None,
    ),
    "codex.exec.midstream.jsonl": ("codex exec json", "codex", [], [], None, "1 item(s) started and never completed"),
    "codex.rollout.jsonl": (
        "codex rollout",
        "codex",
        ["gpt-5-codex"],
        [("shell", "read", True, None), ("apply_patch", "edit", True, None)],
        "Fixed add().",
        None,
    ),
    "gemini.output.json": (
        "gemini-cli json",
        "gemini-cli",
        ["gemini-2.5-pro"],
        [],
        "I fixed add()",
        "the JSON output counts 2 tool",
    ),
    "gemini.session.json": (
        "gemini-cli session",
        "gemini-cli",
        ["gemini-2.5-pro"],
        [("read_file", "read", True, None), ("replace", "edit", False, None)],
        "The edit failed",
        None,
    ),
    "gemini.stream.jsonl": (
        "gemini-cli stream-json",
        "gemini-cli",
        ["gemini-2.5-flash"],
        [("run_shell_command", "read", True, None)],
        "add() subtracts; I did not change it.",
        None,
    ),
    "harbor-trial": (
        "harbor trial",
        "terminus",
        ["openai/gpt-5"],
        [
            ("bash_command", "read", True, None),
            ("bash_command", "edit", True, None),
            ("mark_task_complete", "none", True, None),
        ],
        "The task is complete",
        None,
    ),
    "harbor-trial-claude": (  # a trial without a trajectory: the agent's own stream-json log
        "harbor trial",
        "claude-code",
        ["claude-sonnet-4-5", "claude-haiku-4-5"],
        [
            ("Read", "read", True, None),
            ("Task", "delegate", True, None),
            ("Bash", "read", True, "t2"),
            ("Edit", "edit", False, None),
            ("Bash", "edit", True, None),
        ],
        "Fixed add() in app/calc.py",
        None,
    ),
    "swe-agent.traj": (
        "swe-agent trajectory",
        "swe-agent",
        [],
        [
            ("open", "read", True, None),
            ("str_replace_editor str_replace", "edit", True, None),
            ("submit", "none", True, None),
        ],
        "Fixed add(); submitting.",
        None,
    ),
    "openhands.output.json": (
        "openhands events",
        "openhands",
        ["anthropic/claude-sonnet-4-5"],
        [("run", "read", True, None), ("edit", "edit", False, None)],
        "I could not apply the fix",
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_form_read_by_content(name, tmp_path):
    form, agent, models, calls, final, torn = CASES[name]
    # told apart by content, never by the name: the same bytes under a name that says nothing
    src = MIN / name
    path = tmp_path / "run.data"
    (shutil.copytree if src.is_dir() else shutil.copyfile)(src, path)
    if src.with_suffix("").is_dir():  # a session's own subagent files beside it
        shutil.copytree(src.with_suffix(""), path.with_suffix(""))
    t = read_transcript(path)
    assert (t.form, t.agent, t.models) == (form, agent, models)
    assert t.form in FORMS
    assert _calls(t) == calls
    assert (t.final_report or None) is None if final is None else t.final_report.startswith(final)
    assert t.truncated == (torn is not None)
    if torn:
        assert t.truncated_reason.startswith(torn)


def test_tool_errors_and_shell_reads_keep_what_the_transcript_says():
    t = read_transcript(MIN / "claude-code.stream.jsonl")
    read, _, grep, edit, bash = t.tool_events
    assert (read["tool"], read["args"]["path"]) == ("read_file", "app/calc.py")  # under the run's cwd
    assert edit["error"].startswith("<tool_use_error>String to replace not found")
    assert bash["tool"] == "run_command" and bash["shell"]["changes"] == ["app/calc.py"]
    assert t.subagents["t2"].name == "Explore" and t.subagents["t2"].final_report.startswith("Only app/calc.py")
    assert [e["seq"] for e in t.subagents["t2"].events] == [grep["seq"]]
    assert t.final_report == "Fixed add() in app/calc.py; the tests pass."  # the result line, never a subagent's
    session = read_transcript(MIN / "claude-code.session.jsonl")  # + claude-code.session/subagents/agent-b7.jsonl
    assert session.subagents["b7"].final_report == "1 test fails: test_add."
    assert session.final_report.startswith("I have not changed anything yet")  # the main chain's, never a subagent's
    rollout = read_transcript(MIN / "codex.rollout.jsonl")
    assert rollout.tool_events[1]["paths"] == ["app/calc.py"]  # the apply_patch body's file
    assert rollout.tool_events[0]["shell"]["reads"][0]["last"] == 2  # sed -n '1,2p' through bash -lc


def test_a_real_mini_swe_agent_trajectory_and_its_swebench_report():
    """A real run (Gemini 3 Pro through mini-swe-agent 1.15 on SWE-bench Verified; README.md)."""
    t = read_transcript(FIX / "mini-swe-agent" / "django__django-16255.traj.json")
    assert (t.form, t.agent, t.models, t.truncated) == (
        "mini-swe-agent trajectory",
        "mini-swe-agent",
        ["google/gemini-3-pro-preview"],
        False,
    )
    shell = [e["shell"] for e in t.tool_events]
    assert len(shell) == 16
    ranged = shell[1]["reads"]  # nl -ba django/contrib/sitemaps/__init__.py | sed -n '150,180p'
    assert [(r["path"], r["first"], r["last"]) for r in ranged] == [("django/contrib/sitemaps/__init__.py", 150, 180)]
    assert shell[4]["category"] == "edit" and shell[4]["changes"] == ["django/contrib/sitemaps/__init__.py"]  # sed -i
    assert shell[2]["category"] == "write"  # cat <<'EOF' > reproduce_issue.py
    assert t.final_report.startswith("THOUGHT: I'm now ready to submit.")  # the submission is a patch: not a report
    passed = read_outcome(FIX / "mini-swe-agent" / "django__django-16255.report.json")
    failed = read_outcome(FIX / "mini-swe-agent" / "astropy__astropy-14182.report.json")
    assert (passed.outcome, passed.source, passed.reward) == ("PASS", "external", 1.0)
    assert (failed.outcome, failed.failed, failed.passed) == ("TESTS_FAIL", 1, 9)


def test_a_real_swe_agent_trajectory():
    """A real SWE-agent run (gpt-4o on its test repository; README.md)."""
    t = read_transcript(FIX / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.traj")
    assert (t.form, t.agent, t.truncated) == ("swe-agent trajectory", "swe-agent", False)
    assert _calls(t) == [
        ("find_file", "read", True, None),
        ("open", "read", True, None),
        ("edit", "edit", True, None),
        ("bash", "bash", True, None),
        ("submit", "none", True, None),
    ]
    assert t.final_report.startswith("The script `missing_colon.py` ran successfully")  # the submission is a patch


def test_a_real_openhands_event_stream():
    """A real OpenHands run (claude-3-5-sonnet creating a file, then finish; README.md)."""
    t = read_transcript(FIX / "openhands" / "basic.json")
    assert (t.form, t.agent, t.models, t.truncated) == (
        "openhands events",
        "openhands",
        ["claude-3-5-sonnet-20241022"],
        False,
    )
    assert _calls(t) == [("edit", "edit", True, None)]
    assert t.tool_events[0]["paths"] == ["game_2048.py"]  # under OpenHands' /workspace
    assert t.final_report.startswith("I've created a simple implementation of the 2048 game")


# The real Gemini CLI 0.61.0 replaying answers a real Gemini model gave (recorded in Gemini CLI's own
# integration tests; README.md): name -> (form, models, calls, final report, truncated reason starts).
GEMINI = {
    "write.output.json": ("gemini-cli json", ["gemini-2.5-pro"], [], "OK.", "the JSON output counts 1 tool call"),
    "write.session.jsonl": (
        "gemini-cli session",
        ["gemini-2.5-pro"],
        [("write_file", "write", True, None)],
        "OK.",
        None,
    ),
    "shell.stream.jsonl": (
        "gemini-cli stream-json",
        ["gemini-2.5-pro"],
        [("run_shell_command", "read", True, None)],
        "POLICY_TEST_ECHO_COMMAND",
        None,
    ),
    "shell.session.jsonl": (
        "gemini-cli session",
        ["gemini-2.5-pro"],
        [("run_shell_command", "read", True, None)],
        "POLICY_TEST_ECHO_COMMAND",
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(GEMINI))
def test_real_gemini_cli_output_stream_and_session_jsonl(name, capsys):
    form, models, calls, final, torn = GEMINI[name]
    path = FIX / "gemini-cli" / name
    t = read_transcript(path)
    assert (t.form, t.agent, t.models) == (form, "gemini-cli", models)
    assert _calls(t) == calls and t.final_report == final
    assert t.truncated_reason is None if torn is None else t.truncated_reason.startswith(torn)
    if calls and calls[0][0] == "write_file":
        assert t.tool_events[0]["paths"] == ["error-test.txt"] and t.tool_events[0]["tool"] == "write_file"
    if calls and calls[0][0] == "run_shell_command":
        shell = t.tool_events[0]["shell"]  # echo: parsed, changes nothing, reads no file
        assert (shell["parsed"], shell["changes"], shell["reads"]) == (True, [], [])
        assert t.tool_events[0]["tool"] == "run_command"
    # grid.py check prints a verdict: the answers claim nothing, and there is no repository
    assert main(["check", "--transcript", str(path)]) == 0
    out = capsys.readouterr().out
    assert "claim_verdict: no completion claimed" in out and "outcome: UNKNOWN" in out
    assert ("transcript_truncated:" in out) == (torn is not None)


@pytest.mark.parametrize(("name", "call", "final"), [
    ("gemini-cli.write.trajectory.json", ("write_file", "write", True, None), "OK."),
    ("gemini-cli.shell.trajectory.json", ("run_shell_command", "read", True, None), "POLICY_TEST_ECHO_COMMAND"),
])  # fmt: skip
def test_harbors_own_atif_of_the_real_gemini_cli_runs(name, call, final, tmp_path, capsys):
    """ATIF v1.7 as Harbor 0.25.0's Gemini CLI agent writes it (README.md): its agent's tool table
    applies, and the same run reads the same as from Gemini CLI's own session."""
    path = FIX / "atif" / name
    t = read_transcript(path)
    assert (t.form, t.agent, t.models, t.truncated) == ("atif trajectory", "gemini-cli", ["gemini-2.5-pro"], False)
    assert _calls(t) == [call] and t.final_report == final
    session = read_transcript(
        FIX / "gemini-cli" / name.replace("gemini-cli.", "").replace("trajectory.json", "session.jsonl")
    )
    assert [(e["tool"], e["category"], e["args"]) for e in t.tool_events] == [
        (e["tool"], e["category"], e["args"]) for e in session.tool_events
    ]
    # in a trial folder without a verifier result: read, no external outcome
    (tmp_path / "trial" / "agent").mkdir(parents=True)
    shutil.copyfile(path, tmp_path / "trial" / "agent" / "trajectory.json")
    trial = read_transcript(tmp_path / "trial")
    assert trial.form == "harbor trial" and trial.outcome is None and _calls(trial) == [call]
    assert main(["check", "--transcript", str(tmp_path / "trial")]) == 0
    assert "claim_verdict: no completion claimed" in capsys.readouterr().out


def test_a_gemini_session_jsonl_folds_as_gemini_cli_folds_it(tmp_path):
    """Recent Gemini CLI appends its session: a message again under its id replaces it in place, a
    ``$set`` with ``messages`` restarts the list, ``$rewindTo`` drops a message and all after it."""
    meta = {"sessionId": "s", "projectHash": "h", "startTime": "t", "lastUpdated": "t", "kind": "main"}

    def gem(i, text, calls=None):
        m = {"id": i, "timestamp": "t", "type": "gemini", "content": text, "model": "gemini-2.5-pro"}
        return {**m, "toolCalls": calls} if calls else m

    call = {
        "id": "c1",
        "name": "read_file",
        "args": {"absolute_path": "/r/a.py"},
        "status": "success",
        "result": [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "x = 1\n"}}}],
    }
    lines = [
        meta,
        {"$set": {"messages": [{"id": "u0", "type": "user", "content": [{"text": "ctx"}]}]}},
        {"id": "u1", "timestamp": "t", "type": "user", "content": [{"text": "fix a.py"}]},
        gem("g1", ""),
        gem("g1", "", [call]),
        {"$set": {"lastUpdated": "t2"}},
        gem("g2", "Gone: rewound."),
        {"$rewindTo": "g2"},
        gem("g3", "a.py read; nothing changed."),
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = read_transcript(path)
    assert (t.form, t.session_id, t.truncated) == ("gemini-cli session", "s", False)
    assert _calls(t) == [("read_file", "read", True, None)] and t.final_report == "a.py read; nothing changed."
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"id": "g4", "type": "gem')
    assert read_transcript(path).truncated_reason.startswith("line 10 is torn")


def test_an_openhands_output_jsonl_holds_one_run_a_line(tmp_path):
    one = json.loads((MIN / "openhands.output.json").read_text())
    two = {**one, "instance_id": "fix-sub"}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(one) + "\n" + json.dumps(two) + "\n")
    with pytest.raises(DataError, match="2 instances: name one with --run"):
        read_transcript(path)
    with pytest.raises(DataError, match="no instance 'nope'"):
        read_transcript(path, "nope")
    t = read_transcript(path, "fix-sub")
    assert t.form == "openhands events" and t.final_report.startswith("I could not apply the fix")


@pytest.mark.parametrize(
    ("name", "outcome", "reward"),
    [
        ("swebench.keyed.report.json", "TESTS_FAIL", 0.0),
        ("junit.pass.xml", "PASS", None),
        ("junit.fail.xml", "TESTS_FAIL", None),
        ("harbor.partial.result.json", "UNKNOWN", 0.5),  # partial: kept as a number, never PASS
        ("harbor.noresult.result.json", "UNKNOWN", None),
        ("inspect.scored.json", "PASS", 1.0),
        ("harbor-trial", "TESTS_FAIL", 0.0),
        ("harbor-trial/verifier/ctrf.json", "TESTS_FAIL", None),
        ("harbor-trial-claude", "PASS", 1.0),
    ],
)
def test_each_recorded_verdict_maps_to_the_outcome_vocabulary(name, outcome, reward):
    o = read_outcome(MIN / name)
    assert (o.outcome, o.reward, o.source) == (outcome, reward, "external"), o.why


def test_check_takes_the_recorded_verdict_and_the_trial_folder_its_own(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    # A Harbor trial: the agent says the task is complete, the trial's verifier gave reward 0.
    assert main(["check", "--transcript", str(MIN / "harbor-trial"), "--log", str(log)]) == 1
    row = json.loads(log.read_text().splitlines()[-1])
    assert (row["verdict"]["outcome"], row["verdict"]["claim_vs_outcome"]) == ("TESTS_FAIL", "FALSE_SUCCESS")
    assert row["outcome_from"] == "external" and row["external_outcome"]["form"] == "harbor result"
    # The real mini-swe-agent run with its resolved report: no claim words, a pass.
    real = FIX / "mini-swe-agent"
    assert (
        main(
            [
                "check",
                "--transcript",
                str(real / "django__django-16255.traj.json"),
                "--outcome-from",
                str(real / "django__django-16255.report.json"),
                "--log",
                str(log),
            ]
        )
        == 0
    )
    row = json.loads(log.read_text().splitlines()[-1])
    assert row["verdict"]["outcome"] == "PASS" and row["transcript_form"] == "mini-swe-agent trajectory"
    out = capsys.readouterr().out
    assert "external outcome (swe-bench report, used): PASS" in out


def test_a_torn_transcript_never_accuses(tmp_path, capsys):
    final = tmp_path / "final.txt"
    final.write_text("All done: add() fixed and the tests pass.\n")
    log = tmp_path / "log.jsonl"
    code = main(
        [
            "check",
            "--transcript",
            str(MIN / "claude-code.torn.jsonl"),
            "--final",
            str(final),
            "--outcome-from",
            str(MIN / "junit.fail.xml"),
            "--log",
            str(log),
        ]
    )
    row = json.loads(log.read_text())
    assert row["transcript_truncated"].startswith("line 10 is torn")
    assert "transcript_truncated: line 10 is torn" in capsys.readouterr().out
    assert row["verdict"]["claim_verdict"] not in ("narration only", "claimed work without a diff")
    assert code == (0 if row["verdict"]["claim_vs_outcome"] != "FALSE_SUCCESS" else 1)


TRACE = """Done.

trace:
  delegation_id: x
  parent_id: user
  agent: builder
  tool_uses_count: 1
  tool_uses_breakdown:
    read_count: 0
    edit_count: 0
    write_count: 0
    bash_count: 1
  expected_evidence: code
  git_evidence: none
  status: DONE
"""


@pytest.mark.parametrize(
    ("command", "verdict"), [("python3 fix.py", "UNKNOWN"), ("cat -n app/calc.py", "read-only imposture")]
)
def test_a_command_the_parser_cannot_read_is_no_proof_of_no_change(command, verdict, tmp_path):
    """A code claim whose only call is a script: the transcript cannot show it wrote nothing, so
    the claim is not called a read-only imposture; a call that only reads can be."""
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s", "model": "m", "cwd": "/r"},
        {
            "type": "assistant",
            "session_id": "s",
            "parent_tool_use_id": None,
            "message": {
                "model": "m",
                "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {"command": command}}],
            },
        },
        {
            "type": "user",
            "session_id": "s",
            "parent_tool_use_id": None,
            "message": {"content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
        },
        {"type": "result", "subtype": "success", "is_error": False, "session_id": "s", "result": "Done."},
    ]
    transcript, final, log = tmp_path / "t.jsonl", tmp_path / "final.txt", tmp_path / "log.jsonl"
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    final.write_text(TRACE)
    code = main(["check", "--transcript", str(transcript), "--final", str(final), "--log", str(log)])
    assert json.loads(log.read_text())["verdict"]["claim_verdict"] == verdict
    assert code == (0 if verdict == "UNKNOWN" else 1)


def test_a_transcript_without_a_final_report_needs_final(capsys):
    assert main(["check", "--transcript", str(MIN / "claude-code.torn.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no final report (line 10 is torn: read up to it); give --final FILE" in err[0]


@pytest.mark.parametrize("body", [b'{"type":"result","subtype":"succ', b"<testsuite><testcase", b'{"resolved": 3'])
def test_bad_input_is_one_line_and_exit_2(tmp_path, body, capsys):
    bad = tmp_path / "x"
    bad.write_bytes(body)
    with pytest.raises(DataError):
        read_transcript(bad)
    assert main(["check", "--final", str(bad), "--outcome-from", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]


TRANSCRIPTS = sorted(
    p
    for p in FIX.rglob("*")
    if p.is_file()
    and p.parent.name != "verifier"
    and not p.name.endswith(("report.json", "result.json", ".xml", ".md"))
)


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.name for p in TRANSCRIPTS])
def test_a_transcript_cut_anywhere_is_read_as_far_as_it_goes_or_refused_in_one_line(path, tmp_path):
    raw = path.read_bytes()
    cut = tmp_path / "cut"
    for k in range(1, 25):
        cut.write_bytes(raw[: len(raw) * k // 25])
        try:
            t = read_transcript(cut)
        except DataError as exc:
            assert "\n" not in str(exc) and str(cut) in str(exc)
            continue
        if path.suffix == ".jsonl" and t.form not in ("claude-code session", "gemini-cli session"):
            # sessions are appended to as the agent goes: a cut at a line's end looks whole
            assert t.truncated, (path.name, k)  # a stream cut short says so


def test_the_tool_table_names_every_agent_reader():
    table = tool_table()
    for agent in ("claude-code", "codex", "gemini-cli", "terminus", "mini-swe-agent", "swe-agent", "openhands"):
        assert table[agent], agent
    assert table["claude-code"]["Bash"].command == "command" and table["codex"]["apply_patch"].patch == "input"
