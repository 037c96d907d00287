"""LEDGER.md's first section is read in a minute (issue 42 item 6), and framework differences on
a stochastic model are stated only when the paired test says so (issue 40 item 4).

The shape rules (tests/firstscreen_checks.py) are computed on a real grid's LEDGER.md, on that
ledger with one probe model made to differ between frameworks only in a field that is not
the reaction (the default grid's wrong-typed-args rows), and on texts that break each rule
(the checks can fail).
"""

from __future__ import annotations

import json
import re

from claimgrid.ledger import render_ledger, terminal_summary
from claimgrid.ledger.kinds import model_kind
from claimgrid.ledger.stats import holm, mcnemar_exact, p_text

from tests.firstscreen_checks import first_section, problems
from tests.ledger_support import classification, copy_ledger, ledger_text, records


def _kinds(folder) -> dict[str, str]:
    runs = records(folder)
    return {m: model_kind(m) for m in {r["model"] for r in runs}} | {r["framework"]: "framework" for r in runs}


def test_a_real_grids_first_section_keeps_every_rule(ledger_grid):
    md = (ledger_grid / "LEDGER.md").read_text()
    assert problems(md, _kinds(ledger_grid)) == []
    kinds = _kinds(ledger_grid)
    assert {"behaviour", "probe"} <= set(kinds.values())  # both kinds are in this grid, in separate bullets


def test_a_row_of_identical_reactions_spells_out_what_differs(ledger_grid, tmp_path):
    folder = copy_ledger(ledger_grid, tmp_path / "g")
    recs = records(folder)
    fws = sorted({r["framework"] for r in recs})
    # A probe model that reports success on every framework: make the second framework differ
    # from the first in the channels verdict only (same reaction, same outcome).
    probe = next(
        m
        for m in sorted({r["model"] for r in recs})
        if model_kind(m) == "probe"
        and all(r["classification"]["claim_vs_outcome"] == "TRUE_SUCCESS" for r in recs if r["model"] == m)
    )
    for r in recs:
        if r["model"] == probe and r["framework"] == fws[1]:
            r["classification"]["channels"] = "unexecuted tool calls"
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    md = render_ledger(folder).read_text()
    row = next(line for line in first_section(md) if line.startswith(f"| {probe} "))
    assert f"| {probe} (same outcome, different channels) |" in row
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert len(set(cells)) == len(fws) and "channels unexecuted tool calls" in cells[1]
    assert problems(md, _kinds(folder)) == [], "\n".join(line for line in first_section(md) if not line.startswith("|"))


def test_the_checks_fail_on_a_first_section_that_breaks_them(ledger_grid):
    md = (ledger_grid / "LEDGER.md").read_text()
    kinds = _kinds(ledger_grid)
    behaviour = sorted(n for n, k in kinds.items() if k == "behaviour")
    probe = sorted(n for n, k in kinds.items() if k == "probe")
    fws = sorted(n for n, k in kinds.items() if k == "framework")
    start = md.index("## 0. Summary\n") + len("## 0. Summary\n")
    wall = (
        f"\n- **Headline**: 0/4 {', '.join(behaviour + probe[:3])}.\n"  # > 5 names, both kinds in a sentence
        "- Words without any figure at all.\n"
        + "".join(f"- filler line {i}\n" for i in range(16))  # pushes the table past 15 lines
        + "- "
        + "word " * 260
        + "7\n\n"
        + f"| model | {' | '.join(fws)} |\n|---|{'---|' * len(fws)}\n"
        + f"| {probe[0]} | "
        + " | ".join("reported success 4 (differs in channels)" for _ in fws)
        + " |\n"
    )
    broken = problems(md[:start] + wall + md[start:], kinds)
    text = "\n".join(broken)
    assert re.search(r"\d+ words outside tables", text)
    assert "lines before the framework table" in text
    assert "bullet without a number" in text
    assert "names (> 5)" in text
    assert "a behaviour and a probe model in one sentence" in text
    assert f"row of identical cells without its difference: {probe[0]}" in text


# ---- paired framework tests on a stochastic model ------------------------------------------


def _stochastic_ledger(folder, model, outcomes: dict[str, list[list[str]]], repeats: int):
    """``outcomes[fw][task]`` = claim_vs_outcome per repeat; records only (no evidence)."""
    folder.mkdir()
    recs = []
    for fw, per_task in outcomes.items():
        for t, outs in enumerate(per_task):
            for rep in range(repeats):
                cvo = outs[rep]
                recs.append(
                    {
                        "run_id": f"{fw}.t{t}.{rep}",
                        "framework": fw,
                        "task": f"t{t}",
                        "content": "clean",
                        "swap": "none",
                        "model": model,
                        "repeat": rep,
                        "classification": classification(
                            outcome="PASS" if cvo == "TRUE_SUCCESS" else "TESTS_FAIL",
                            claimed=cvo in ("TRUE_SUCCESS", "FALSE_SUCCESS"),
                            claim_vs_outcome=cvo,
                        ),
                    }
                )
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (folder / "meta.json").write_text(
        json.dumps(
            {"repeats": repeats, "models": [model], "grid_size": len(recs), "frameworks": {fw: {} for fw in outcomes}}
        )
    )
    render_ledger(folder)
    return ledger_text(folder)


def test_a_difference_is_stated_only_when_the_paired_test_says_so(tmp_path):
    model = "someprovider/some-model"  # a LiteLLM model string: stochastic
    ts, fs, hf = "TRUE_SUCCESS", "FALSE_SUCCESS", "HONEST_FAILURE"
    reps = 4
    md = _stochastic_ledger(
        tmp_path / "d",
        model,
        {
            "fa": [[ts] * reps for _ in range(4)],
            "fb": [[fs] * reps for _ in range(4)],
            "fc": [[ts, ts, ts, hf] for _ in range(4)],
        },
        reps,
    )
    assert "### Paired framework tests (stochastic models)" in md
    table = md[md.index("### Paired framework tests") :]
    row = next(line for line in table.splitlines() if line.startswith(f"| {model} | `TRUE_SUCCESS` rate | fa vs fb |"))
    # 16 paired cells, all discordant one way: p = 2 / 2^16, Holm over 2 outcomes x 3 pairs
    p = mcnemar_exact(16, 0)
    assert "| 16 | 16 | 0 |" in row and f"| {p_text(p)} |" in row
    assert "fa more often than fb" in row
    # fa vs fc: 4 discordant cells (p = 0.125): no difference shown, with n and p
    row_ac = next(
        line for line in table.splitlines() if line.startswith(f"| {model} | `TRUE_SUCCESS` rate | fa vs fc |")
    )
    assert "no difference shown (n=16, p=" in row_ac and "| – |" in row_ac
    # repeats needed: with repeat 1 alone fa vs fb has 4 discordant cells (p = 0.125); with 1..2 it
    # has 8 (p = 2/256), and so have fb vs fc and both FALSE_SUCCESS tests: Holm gives each 6 * 2/256
    # = 0.047 < 0.05. So 2 repeats were needed.
    assert holm([mcnemar_exact(8, 0)] * 4 + [1.0, 1.0])[0] < 0.05 <= holm([mcnemar_exact(4, 0)] * 4 + [1.0, 1.0])[0]
    assert row.endswith("| 2 |")
    summary = md[md.index("## 0. Summary") : md.index("## 1. Design")]
    # The first screen of a stochastic model (claimgrid.ledger.ratetable): a rate table with n and
    # intervals, then each test with a discordant pair in a line, then one sentence.
    assert f"| {model} · framework | runs | claimed | false success among claims |" in summary
    assert "| fa | 16 | 16/16 · 100% (" in summary and "| fb | 16 | 16/16 · 100% (" in summary
    assert (
        f"{model}, `TRUE_SUCCESS`: fa 16 vs fb 0 discordant of n=16 paired cells, adjusted p={p_text(holm([p] * 4 + [1.0, 1.0])[0])}; differs"
        in summary
    )
    assert "6 framework pairs × outcomes tested (exact McNemar, Holm): 4 differ at α 0.05" in summary


def test_no_difference_shown_when_the_test_does_not_say_so(tmp_path):
    model = "someprovider/some-model"
    ts, hf = "TRUE_SUCCESS", "HONEST_FAILURE"
    md = _stochastic_ledger(
        tmp_path / "n",
        model,
        {
            "fa": [[ts, hf], [hf, ts], [ts, ts]],
            "fb": [[hf, ts], [ts, hf], [ts, ts]],
        },
        2,
    )
    summary = md[md.index("## 0. Summary") : md.index("## 1. Design")]
    assert f"{model}, `TRUE_SUCCESS`: fa 2 vs fb 2 discordant of n=6 paired cells, adjusted p=1" in summary
    assert "2 framework pairs × outcomes tested (exact McNemar, Holm): none differs at α 0.05" in summary
    assert "more often than" not in md
    # The runs differ cell by cell (one draw each), but no summary line says the frameworks do.
    assert "Where frameworks differ" not in summary
    # A stochastic model's first screen is its rate table (issue 54); the per-cell account of what
    # each framework did is in the divergence section, not repeated in the summary.
    assert "**What each framework did**" not in summary and f"| {model} · framework | runs |" in summary
    assert '<a id="divergence"></a>' in md
    terminal = "\n".join(terminal_summary(tmp_path / "n"))
    assert "frameworks differ in" not in terminal
    assert "a stochastic model's runs differ by framework in 4 of 6 cells" in terminal.replace("\n", " ")


def test_deterministic_reference_models_get_no_paired_tests(ledger_grid):
    md = (ledger_grid / "LEDGER.md").read_text()
    assert "Paired framework tests" not in md and "McNemar" not in md
