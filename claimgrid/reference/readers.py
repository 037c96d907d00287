"""Reference models that read files through the shell, as real reviewers do.

Each is diligent's plan with every ``read_file`` of the task's reference (not the content
slot's read, so an instruction reaches them as it reaches diligent) replaced by shell
commands: ``cat -n`` (numbered lines), two ``sed -n`` ranges (the file's two halves, one
call each, joined across calls), ``nl -ba``, ``awk`` with a line range, ``head -n``,
``grep -n ''`` (every line, numbered), ``tail -n +1``, or ``grep -n -m1 .`` (one line of the
file: a skim, not a read). They are not in the default grid; run them with ``--models``
(the forms every coding agent's shell is held to: tests/frameworks/test_shell_reads_grid.py).

Their truth is the plan truth of their steps: a step that completes printing a whole file
says so (``Step.reads``, a truth-only annotation like ``Step.changes``), so the truth counts
the file as read; the one-line skim reads nothing. The truth knows which steps print a
whole file because it wrote them; it shares no code with the classifier's coverage rule.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from claimgrid.reference.policies import register_behaviour, worker_plan
from claimgrid.reference.script import RunScript, Step
from claimgrid.reference.truth import Behaviour

DILIGENT_PLAN = worker_plan(obey=False)


def _reads_by(commands: Callable[[str], list[str]], whole: bool):
    """A plan: diligent's, each reference ``read_file`` of a path done by ``commands(path)``;
    ``whole``: together they print the whole file (the last one completes the read)."""

    def plan(script: RunScript, was_seen: bool) -> list[Step]:
        steps = []
        for step in DILIGENT_PLAN(script, was_seen):
            path = step.args.get("path")
            if step.tool == "read_file" and path != script.content_slot and isinstance(path, str):
                cmds = commands(shlex.quote(path))
                steps += [
                    Step("run_command", {"command": c}, reads=(path,) if whole and k == len(cmds) - 1 else ())
                    for k, c in enumerate(cmds)
                ]
            else:
                steps.append(step)
        return steps

    return plan


# Half a file's lines, computed by the shell: the policy never sees the file.
HALF = "$(( ($(wc -l < {p}) + 1) / 2 ))"


def _halves(p: str) -> list[str]:
    return [f'sed -n "1,{HALF.format(p=p)}p" {p}', f'sed -n "$(({HALF.format(p=p)} + 1)),\\$p" {p}']


NUMBERED = Behaviour(plan=_reads_by(lambda p: [f"cat -n {p}"], whole=True), report="truthful")
RANGED = Behaviour(plan=_reads_by(_halves, whole=True), report="truthful")
SKIMMER = Behaviour(plan=_reads_by(lambda p: [f"grep -n -m1 . {p}"], whole=False), report="truthful")

# Each a form a real reviewer opens a file with through its own shell (issue: a review through
# mini-swe-agent's shell read this way was "files not opened"); the limits are far above any
# task file's length, so each prints the whole file.
SHELL_FORMS = {
    "nl-reviewer": ("`nl -ba`", lambda p: [f"nl -ba {p}"]),
    "awk-reviewer": ("`awk 'NR>=1 && NR<=100000'`", lambda p: [f"awk 'NR>=1 && NR<=100000' {p}"]),
    "head-reviewer": ("`head -n 100000`", lambda p: [f"head -n 100000 {p}"]),
    "grep-reviewer": ("`grep -n ''` (every line, numbered)", lambda p: [f"grep -n '' {p}"]),
    "tail-reviewer": ("`tail -n +1`", lambda p: [f"tail -n +1 {p}"]),
}
for _name, (_how, _commands) in SHELL_FORMS.items():
    register_behaviour(
        _name,
        Behaviour(plan=_reads_by(_commands, whole=True), report="truthful"),
        f"like diligent, but reads the task's files with {_how}",
    )

numbered_reviewer = register_behaviour(
    "numbered-reviewer", NUMBERED, "like diligent, but reads the task's files with `cat -n` (numbered lines)"
)
ranged_reviewer = register_behaviour(
    "ranged-reviewer", RANGED, "like diligent, but reads each task file in two `sed -n` ranges (its halves)"
)
grep_skimmer = register_behaviour(
    "grep-skimmer", SKIMMER, "like diligent, but prints only the first line of each task file (`grep -n -m1 .`)"
)
