"""The full default matrix's distinct cells through ``grid.py run`` (in process, twice), on the
dependency-free ``plain`` framework: calibration on every field, blinding of every request
body, reclassify, and the preflight bug (two grids in one process)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference import registry
from claimgrid.store.record import read_records

from tests.conftest import ROOT

# Deliberate disagreements between a registered truth and the classifier, by name and reason.
# (Empty: every field agrees on every distinct cell of the default matrix.)
DELIBERATE: dict[tuple[str, str], str] = {}


# default_grid (tests/conftest.py): every distinct cell of the default matrix (all tasks,
# conditions and default models), once per session, read-only here.


def records(folder: Path):
    return read_records(folder / "runs.jsonl")


def test_the_default_matrix_ran_whole(default_grid):
    recs = records(default_grid)
    cc, sc = load_content_conditions().values(), load_swap_conditions().values()
    # Each default model is crossed with the conditions its entry runs in (runs_in: the
    # fault models only in the untreated cell).
    per_task = sum(1 for m in registry.default_models() for c in cc for s in sc if registry.get(m).runs_with(c, s))
    assert per_task < len(cc) * len(sc) * len(registry.default_models())  # some entry is restricted
    assert len(recs) == len(in_suite(load_tasks(), "default")) * per_task


def test_calibration_agrees_on_every_field(default_grid):
    recs = records(default_grid)
    compared, wrong = 0, []
    for r in recs:
        assert r.truth, f"{r.run_id}: the registry states no truth for {r.model}"
        c = r.classification.model_dump()
        for field, value in r.truth.items():
            compared += 1
            if c[field] != value and (r.model, field) not in DELIBERATE:
                wrong.append(f"{r.run_id}: {field} = {c[field]!r}, truth {value!r}")
    fields = {f for r in recs for f in r.truth}
    assert {
        "claim_verdict",
        "outcome",
        "claim_vs_outcome",
        "injection",
        "legitimate",
        "declarations",
        "channels",
        "swap",
        "process",
    } <= fields
    assert not wrong, f"{len(wrong)} of {compared} field values disagree:\n" + "\n".join(wrong[:40])


def test_no_request_body_names_the_condition_model_substitute_or_grid(default_grid):
    meta = json.loads((default_grid / "meta.json").read_text())
    recs = records(default_grid)
    names = {
        *load_content_conditions(),
        *load_swap_conditions(),
        *registry.models(),
        meta["grid_id"],
        *(r.run_id for r in recs),
    }
    bodies = []
    for r in recs:
        for line in (default_grid / r.evidence_dir / "gateway.jsonl").read_text().splitlines():
            request = json.loads(line)["request"]
            bodies.append(json.dumps(request))
    assert bodies
    # Searched as one text, bodies joined by a newline (not [\w-]: a match can neither span two
    # bodies nor gain or lose a boundary), and the regex only where the name occurs at all.
    text = "\n".join(bodies)
    # A name that is also an ordinary word in text every cell sends alike (the prompt's
    # trace form says "or none") cannot be told apart from a leak: it is listed, not hidden.
    static = " ".join(t.spec.prompt for t in load_tasks().values())
    from claimgrid.trace import report_instructions

    static += report_instructions("d-x", "agent", True)
    ambiguous = {n for n in names if re.search(rf"\b{re.escape(n)}\b", static)}
    assert ambiguous <= {"none"}, ambiguous
    leaked = {n for n in names - ambiguous if n in text and re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)}
    assert not leaked, f"request bodies name {sorted(leaked)}"
    # The control fields an adapter may hand to its framework or model: prompt, ids, model
    # name, and every path the agent can see (workspace, sandbox, HOME under it).
    for r in recs:
        ctl = json.loads((default_grid / r.evidence_dir / "control.json").read_text())
        visible = json.dumps(
            {k: ctl[k] for k in ("prompt", "run_id", "model", "workspace", "sandbox", "outcome_path", "agent_name")}
        )
        found = {
            n for n in names - ambiguous if n in visible and re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", visible)
        }
        assert not found, (r.run_id, found)
        assert ctl["run_id"] == r.facts.delegation_id and re.fullmatch(r"d-[0-9a-f]{16}", ctl["run_id"])


def test_swap_mention_is_not_an_echo(default_grid):
    swapped = [r for r in records(default_grid) if r.classification.swap in ("hidden", "visible")]
    assert swapped
    # No built-in reference model mentions a swap; an echoed id must not count as one.
    assert not [r.run_id for r in swapped if r.classification.swap_mentioned]


def test_reclassify_reports_what_changed_and_why(default_grid, tmp_path, capsys):
    """A ledger as written before the claim, declaration and channel rules (old classification fields) is reclassified: the
    report names each changed run, field by field, with the rule that decided it."""
    import shutil

    folder = tmp_path / "old"
    shutil.copytree(default_grid, folder)
    lines = (folder / "runs.jsonl").read_text().splitlines()
    old = []
    for line in lines:
        rec = json.loads(line)
        c = rec["classification"]
        for key in (
            "claim_stance",
            "claim_rule",
            "declarations",
            "declaration_mismatches",
            "channels",
            "channel_detail",
            "evidence",
        ):
            c.pop(key, None)
        if c["injection"] == "followed, then undone":
            c["injection"] = "resisted"
        rec.pop("faults", None)  # reclassify re-derives the fault facts from the same evidence
        old.append(rec)
    # One run as the old classifier saw it: a reader-style verdict on the declared-evidence control.
    target = next(r for r in old if r["classification"]["claim_verdict"] == "consistent")
    target["classification"]["claim_verdict"] = "read-only imposture"
    # Sealed by the publisher (the session's key), as the older harness would have sealed them.
    from claimgrid.store import RunStore
    from claimgrid.store.seal import load_key

    RunStore(folder, load_key()).rewrite(old)
    capsys.readouterr()
    assert main(["reclassify", str(folder)]) == 0
    out = capsys.readouterr().out
    report = (folder / "reclassify.txt").read_text()
    # every run gains the new fields (after the line on the classification tables, when they differ)
    head = report.split("\n\n", 1)[0].splitlines()
    assert f"{len(old)} of {len(old)} runs changed, 0 kept" in head, head
    block = report.split(target["run_id"] + "\n", 1)[1].split("\n\n")[0]
    assert "claim_verdict: read-only imposture -> consistent (change evidence tool layer" in block
    assert "declarations: (not recorded) -> " in block
    assert target["run_id"] in out
    assert [r.classification for r in records(folder)] == [r.classification for r in records(default_grid)]
    faults = [r.faults for r in records(folder)]
    assert faults == [r.faults for r in records(default_grid)]
    assert all(f is not None for f in faults) and any(f.fault for f in faults)


def test_two_grids_in_one_process(default_grid, plain_venvs, tmp_path):
    """The preflight shadowing bug: a second grid in the same process used to fail with
    TypeError: 'module' object is not callable. The same one-cell grid carries ``--claim-judge``
    (a reference judge): the run's evidence holds the judge's reading, its classification is
    still the model's truth, and LEDGER.md and RUN.md set the judge beside the reader."""
    out = tmp_path / "second"
    task = next(iter(in_suite(load_tasks(), "default")))
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    swap = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    policies = ROOT / "tests" / "fixtures" / "policies.py"
    assert (
        main(
            [
                "run",
                "--venvs",
                str(plain_venvs),
                "--out",
                str(out),
                "--tasks",
                task,
                "--content",
                content,
                "--swap",
                swap,
                "--policies",
                str(policies),
                "--models",
                "shell-worker",
                "--no-progress",
                "--claim-judge",
                "last-line-judge",
            ]
        )
        == 0
    )
    (r,) = records(out)
    assert r.truth and all(r.classification.model_dump()[k] == v for k, v in r.truth.items())
    assert json.loads((out / "meta.json").read_text())["policies"] == [str(policies)]
    events = [json.loads(x) for x in (out / "runs" / r.run_id / "events.jsonl").read_text().splitlines()]
    (judged,) = [e for e in events if e["source"] == "judge"]
    assert judged["model"] == "last-line-judge" and judged["stance"] in ("yes", "no", "partial", "unclear")
    assert "**judge `last-line-judge`**: agrees with the reader on" in (out / "LEDGER.md").read_text()
    assert f"- the judge read: {judged['stance']}" in (out / "runs" / r.run_id / "RUN.md").read_text()


def test_a_bad_policies_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('nope')\n")
    assert main(["list", "--policies", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"grid.py: error: --policies {bad}: ValueError: nope"
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert main(["list", "--policies", str(empty)]) == 2
    assert "registers no reference model" in capsys.readouterr().err
