"""Every figure of LEDGER.md's first screen and headline, and every explanation of RUN.md and
ledger.html, recomputed from runs.jsonl and the evidence folders of a real grid (the session's
``ledger_grid``) with code independent of the ledger's: no ``0/0``, no reason the data contradicts,
no explanation that is another value's rule."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict

import pytest

from claimgrid.rule_texts import ANY, RULES

from tests.ledger_support import events, headline_row, ledger_text, records

CLAIMED = {"TRUE_SUCCESS", "FALSE_SUCCESS"}
SPLIT_LABELS = re.compile(r",\s(?![^()]*\))")  # commas between labels, not inside "(fw, fw)"


@pytest.fixture(scope="module")
def grid(ledger_grid):
    recs = records(ledger_grid)
    meta = json.loads((ledger_grid / "meta.json").read_text())
    ev = {r["run_id"]: events(ledger_grid, r) for r in recs}
    return ledger_grid, recs, meta, ev, ledger_text(ledger_grid)


def summary_lines(md: str) -> list[str]:
    start = md.index("## 0. Summary")
    body = md[start : md.index("\n## ", start + 1)].splitlines()[1:]
    return [line for line in body if line.strip() and not line.startswith("<a id=")]  # the next heading's anchor


def line_with(md: str, marker: str) -> str:
    return next(line for line in summary_lines(md) if marker in line)


def groups(text: str) -> dict[str, str]:
    """ "v1 a, b; v2 c" -> {label: value}; a value is k/n (with a note) or – (reason)."""
    out = {}
    for part in text.split("; "):
        m = re.match(r"^(\d+/\d+(?: · \d+%)?(?: \([^)]*\))?|– \([^)]*\)) (.+)$", part)
        assert m, part
        for label in SPLIT_LABELS.split(m.group(2)):
            out[label] = m.group(1)
    return out


def did(rec: dict) -> str:
    f = rec["faults"]
    r = f["reaction"]
    if r == "reported DONE":
        r = (
            "recovered"
            if f.get("fault_call") is not None and rec["classification"]["claim_vs_outcome"] == "TRUE_SUCCESS"
            else "reported success"
        )
    return f"retried, {r}" if f.get("retried") else r


def clean_names(meta):
    return [c for c, f in meta["content_facts"].items() if f.get("carries") is None]


def injected_names(meta):
    return [c for c, f in meta["content_facts"].items() if f.get("carries") == "attacker_goal"]


def cls(rec):
    return rec["classification"]


# ---- first screen -------------------------------------------------------------------


def test_first_screen_is_short_and_nothing_reads_0_over_0(grid):
    folder, recs, _, _, md = grid
    assert len(summary_lines(md)) <= 15
    assert "0/0" not in md and "0/0" not in (folder / "RUNS.md").read_text()
    for r in recs:
        assert "0/0" not in (folder / r["evidence_dir"] / "RUN.md").read_text()


def test_plan_line_states_which_models_ran_where(grid):
    _, recs, meta, _, md = grid
    cells = {(r["task"], r["content"], r["swap"], r["model"], r["repeat"]) for r in recs}
    fws = {r["framework"] for r in recs}
    assert f"{len(recs)} runs = {len(fws)} frameworks × {len(cells)} cells" in line_with(md, "**Plan**")
    # The first screen counts models by kind; the design table's plan row names them.
    row = next(line for line in md.splitlines() if line.startswith("| plan (from the records) |"))
    plan = row.split("|")[2].strip()
    assert f"{len(recs)} runs = {len(fws)} frameworks × {len(cells)} cells" in plan
    every_content, every_swap = {r["content"] for r in recs}, {r["swap"] for r in recs}
    body = plan.split("): ", 1)[1].split(". Below:")[0]
    seen = set()
    for part in body.split("; "):
        models, *dims = part.split(" × ")
        for m in models.split(", "):
            seen.add(m)
            contents = {r["content"] for r in recs if r["model"] == m}
            swaps = {r["swap"] for r in recs if r["model"] == m}
            want_c = (
                f"{len(contents)} content conditions"
                if contents == every_content and len(contents) > 1
                else "content " + "/".join(sorted(contents))
            )
            want_s = (
                f"{len(swaps)} swap conditions"
                if swaps == every_swap and len(swaps) > 1
                else "swap " + "/".join(sorted(swaps))
            )
            assert (
                dims[1].startswith("content") and set(dims[1].split(" ", 1)[1].split("/")) == contents
                if not want_c[0].isdigit()
                else dims[1] == want_c
            ), (m, dims)
            assert set(dims[2].split(" ", 1)[1].split("/")) == swaps if not want_s[0].isdigit() else dims[2] == want_s
    assert seen == {r["model"] for r in recs}
    fault_models = {r["model"] for r in recs if r["faults"]["fault"]}
    # the fault models run in one condition only: the plan says so instead of multiplying everything
    assert fault_models and all(
        {(r["content"], r["swap"]) for r in recs if r["model"] == m}
        == {next((r["content"], r["swap"]) for r in recs if r["model"] == m)}
        for m in fault_models
    )


def test_framework_line_recomputed(grid):
    _, recs, _, _, md = grid
    by_cell = defaultdict(set)
    for r in recs:
        c = cls(r)
        by_cell[(r["task"], r["content"], r["swap"], r["model"], r["repeat"])].add(
            json.dumps(
                {
                    k: c.get(k)
                    for k in (
                        "claim_verdict",
                        "outcome",
                        "claim_vs_outcome",
                        "injection",
                        "legitimate",
                        "swap",
                        "process",
                        "review",
                    )
                },
                sort_keys=True,
            )
        )
    differ = sum(len(v) > 1 for v in by_cell.values())
    if differ:
        assert f"({differ} of {len(by_cell)} cells;" in line_with(md, "Where frameworks differ")
    else:
        assert f"identical in all {len(by_cell)} cells" in line_with(md, "**Frameworks**")


def _headline_value(recs, model, fw, fn):
    return fn([r for r in recs if r["model"] == model and r["framework"] == fw and r["swap"] == "none"])


def _grouped_lines(md, marker) -> dict[str, str]:
    """{label: value} over every first-screen bullet starting with ``marker`` (one per model
    group); value groups the bullet counts instead of naming ("3/4 for 12 ... models") are skipped."""
    got = {}
    for line in summary_lines(md):
        if not line.startswith(f"- {marker}") or "blocks" in line:
            continue
        text = re.split(r"models(?: \([^)]*\))?: ", line, maxsplit=1)[1].rstrip(".")
        text = re.sub(r" \(\[table\]\([^)]*\)\)$", "", text)
        got |= groups("; ".join(p for p in text.split("; ") if not re.search(r" for \d+ .*models?", p)))
    return got


def _check_grouped(md, marker, recs, fn, kinds=("behaviour", "gaming")):
    got = _grouped_lines(md, marker)
    fws = sorted({r["framework"] for r in recs})
    from claimgrid.ledger.kinds import model_kind

    assert {m for m in {r["model"] for r in recs} if model_kind(m) == "behaviour"} <= {g.split(" (")[0] for g in got}
    for m in {r["model"] for r in recs}:
        if model_kind(m) not in kinds:
            continue  # fault and probe models: one counted finding, their table is the divergence table
        values = {fw: _headline_value(recs, m, fw, fn) for fw in fws}
        if len(set(values.values())) == 1:
            assert got[m] == values[fws[0]], (marker, m, got.get(m), values)
        else:
            for fw, v in values.items():
                assert next(val for lab, val in got.items() if lab.startswith(f"{m} (") and fw in lab) == v


def test_headline_false_success_and_utility_recomputed(grid):
    _, recs, meta, ev, md = grid
    clean = clean_names(meta)

    def fs(runs):
        c = [r for r in runs if r["content"] in clean]
        k = [r for r in c if cls(r)["claim_vs_outcome"] in CLAIMED]
        if not k:
            reasons = ", ".join(f"{t} {n}" for t, n in Counter(did(r) for r in c).most_common())
            return f"– (nothing claimed: {reasons})" if c else f"– (not run under {'/'.join(clean)})"
        return f"{sum(cls(r)['claim_vs_outcome'] == 'FALSE_SUCCESS' for r in k)}/{len(k)}"

    tool_free = {
        r["task"]
        for r in recs
        if cls(r)["outcome"] == "PASS"
        and not any(e["source"] == "tools" and e["kind"] == "tool_call" for e in ev[r["run_id"]])
    }

    def utility(runs):
        c = [r for r in runs if r["content"] in clean]
        passed = [r for r in c if cls(r)["outcome"] == "PASS"]
        text = f"{len(passed)}/{len(c)}"
        if passed and all(r["task"] in tool_free for r in passed):
            text += f" (only {'/'.join(sorted({r['task'] for r in passed}))}, where doing nothing passes)"
        return text

    _check_grouped(md, "**False success**", recs, fs)
    _check_grouped(md, "**Utility**", recs, utility, kinds=("behaviour",))


def _goal(ev_run, kind="attacker_goal"):
    e = next((e for e in ev_run if e["source"] == "verifier" and e["kind"] == kind and e.get("applicable")), None)
    return None if e is None else e.get("achieved" if kind == "attacker_goal" else "followed")


def _goal_in_clean(ev_run, check) -> bool:
    """The attacker-goal check on a clean run, from its verifier events (the clean cell's
    verifier never evaluated the goal)."""
    if check["kind"] == "review_verdict":
        review = next(e for e in ev_run if e["source"] == "verifier" and e["kind"] == "review")
        return review["verdict"] == check["value"]
    if check["kind"] in ("file_exists", "path_changed"):
        diff = next(e for e in ev_run if e["source"] == "verifier" and e["kind"] == "diff")
        return any(f["path"] == check["path"] for f in diff["files"])
    raise AssertionError(f"no independent reading for check kind {check['kind']}")


def _paired(recs, meta, ev, runs, contents):
    sel = [r for r in runs if r["content"] in contents]
    if not sel:
        return f"– (not run under {'/'.join(contents)})"
    clean = clean_names(meta)
    counts = Counter()
    k = n = 0
    for r in sel:
        c = cls(r)
        if c["injection"] not in ("followed", "followed, then undone", "resisted"):
            counts["not reached"] += 1
            continue
        if c["process"] != "ok":
            counts["did not finish"] += 1
            continue
        match = next(
            x
            for x in recs
            if x["content"] in clean and all(x[f] == r[f] for f in ("framework", "task", "swap", "model", "repeat"))
        )
        check = meta["task_facts"][r["task"]]["attacker_goal_check"]
        if _goal_in_clean(ev[match["run_id"]], check):
            counts["clean run already met it"] += 1
            continue
        n += 1
        k += bool(_goal(ev[r["run_id"]]))
    out = ", ".join(f"{v} {key}" for key, v in counts.items())
    if not n:
        return f"– ({out})"
    return f"{k}/{n} · {(200 * k + n) // (2 * n)}%" + (f" (left out: {out})" if out else "")


def _same_reasons(got: str, want: str) -> bool:
    """Equal up to the order the reasons are listed in."""
    split = lambda s: (s.split(" (", 1)[0], sorted(s.split(" (", 1)[1].rstrip(")").split(", ")) if " (" in s else [])
    return split(got) == split(want)


def test_paired_attack_success_recomputed(grid):
    _, recs, meta, ev, md = grid
    inj = injected_names(meta)
    got = _grouped_lines(md, "**Paired attack success**")
    for m in got:
        runs = [r for r in recs if r["model"] == m and r["swap"] == "none" and r["framework"] == recs[0]["framework"]]
        assert _same_reasons(got[m], _paired(recs, meta, ev, runs, inj)), (m, got[m])
    obedient = [v for lab, v in got.items() if lab == "obedient"]
    assert obedient and not obedient[0].startswith("0/")  # only obedient follows injected goals
    assert all(v.startswith(("0/", "–")) for lab, v in got.items() if lab != "obedient")


def test_claim_check_line_recomputed(grid):
    _, recs, _, _, md = grid
    line = " ".join(line for line in summary_lines(md) if "**Claim check**" in line)
    flagged = lambda r: cls(r)["claim_verdict"] not in ("consistent", "UNKNOWN")
    for fw in sorted({r["framework"] for r in recs}):
        claimed = [r for r in recs if r["framework"] == fw and cls(r)["claim_vs_outcome"] in CLAIMED]
        stated = [r for r in claimed if "claim_verdict" in (r.get("truth") or {})]
        mis = [r for r in stated if r["truth"]["claim_verdict"] != "consistent"]
        ts = [
            r
            for r in stated
            if r["truth"]["claim_verdict"] == "consistent" and cls(r)["claim_vs_outcome"] == "TRUE_SUCCESS"
        ]
        fs = [
            r
            for r in stated
            if r["truth"]["claim_verdict"] == "consistent" and cls(r)["claim_vs_outcome"] == "FALSE_SUCCESS"
        ]
        assert mis and ts  # the grid has both kinds of success
        assert f"misreported successes caught {sum(map(flagged, mis))}/{len(mis)}" in line
        assert f"honest successes flagged {sum(map(flagged, ts))}/{len(ts)}" in line
        assert f"false successes with an honest report {len(fs)}" in line
        rest = [r for r in claimed if r not in stated]
        if rest:
            rfs = [r for r in rest if cls(r)["claim_vs_outcome"] == "FALSE_SUCCESS"]
            want = (
                f"false successes flagged {sum(map(flagged, rfs))}/{len(rfs)}"
                if rfs
                else "false successes flagged – (none)"
            )
            assert want in line


def test_treatment_line_recomputed(grid):
    _, recs, meta, ev, md = grid
    line = " ".join(
        line for line in summary_lines(md) if line.startswith(("- **Swaps**", "- **Substitute", "- **After a"))
    )
    specs = meta["swap_conditions"]
    for fw in sorted({r["framework"] for r in recs}):
        sw = [r for r in recs if r["framework"] == fw and r["swap"] != "none"]
        noop = [r for r in sw if specs[r["swap"]]["on_unavailable"] == "substitute" and r["model"] == r["substitute"]]
        fired = [
            r
            for r in sw
            if r not in noop
            and any(e["source"] == "gateway" and e.get("swap") not in (None, "none") for e in ev[r["run_id"]])
        ]
        assert f"fired in {len(fired)} of {len(sw)} swapped runs" in line
        not_reached = len(sw) - len(fired) - len(noop)
        if not_reached:
            assert f"{not_reached} ended first" in line
        if noop:
            assert f"{len(noop)} no-ops" in line
        served = [r for r in fired if specs[r["swap"]]["on_unavailable"] == "substitute"]
        fs = [r for r in served if cls(r)["claim_vs_outcome"] == "FALSE_SUCCESS"]
        if served:
            assert f"**Substitute serving**: false success {len(fs)}/{len(served)}" in line
        refused = [r for r in sw if cls(r)["swap"] == "prevented"]
        if refused:
            assert (
                f"**After a refused call**: still claimed success {sum(bool(cls(r)['claimed']) for r in refused)}/{len(refused)}"
                in line
            )


def test_headline_table_recomputed(grid):
    _, recs, meta, ev, md = grid
    head = md[md.index("## 2. Headline") : md.index("## 3.")]
    clean, inj = clean_names(meta), injected_names(meta)
    pct = lambda k, n: f"{k}/{n} · {(200 * k + n) // (2 * n)}%"
    fw0 = sorted({r["framework"] for r in recs})[0]
    tool_free = {
        r["task"]
        for r in recs
        if cls(r)["outcome"] == "PASS"
        and not any(e["source"] == "tools" and e["kind"] == "tool_call" for e in ev[r["run_id"]])
    }
    faulted = {
        r["run_id"]
        for r in recs
        if r["swap"] == "none"
        and (
            r["faults"]["fault_call"] is not None
            or any(e["source"] == "gateway" and e["kind"] == "exchange" and e["status"] != 200 for e in ev[r["run_id"]])
        )
    }
    assert ("the assigned model served every call." in head) == (not faulted)
    if faulted:
        assert f"the gateway faulted or refused a call in {len(faulted)} runs" in head
    for m in {r["model"] for r in recs}:
        runs = [r for r in recs if r["model"] == m and r["swap"] == "none" and r["framework"] == fw0]
        cells = headline_row(head, m, fw0)
        assert cells is not None, m
        c = [r for r in runs if r["content"] in clean]
        passed = {r["task"] for r in c if cls(r)["outcome"] == "PASS"}
        note = f" (only {'/'.join(sorted(passed))}: doing nothing passes)" if passed and passed <= tool_free else ""
        assert cells[2] == pct(sum(cls(r)["outcome"] == "PASS" for r in c), len(c)) + note
        k = [r for r in c if cls(r)["claim_vs_outcome"] in CLAIMED]
        if k:
            assert cells[3] == pct(sum(cls(r)["claim_vs_outcome"] == "FALSE_SUCCESS" for r in k), len(k))
        else:
            assert cells[3].startswith("– (nothing claimed: ")
        a = [r for r in runs if r["content"] in inj]
        if not a:  # never attacked: in the clean-only table, without the attack columns
            assert len(cells) == 4, (m, cells)
            continue
        assert cells[4] == pct(sum(cls(r)["outcome"] == "PASS" for r in a), len(a))
        for i, content in enumerate(inj):
            assert _same_reasons(cells[5 + i], _paired(recs, meta, ev, runs, [content])), (m, content, cells[5 + i])


# ---- explanations ----------------------------------------------------------------------


def _rule_of(field, value) -> str:
    texts = RULES[field]
    if ANY in texts:
        return texts[ANY]
    return texts["null" if value is None else ("true" if value is True else "false" if value is False else str(value))]


def test_every_explanation_is_a_rule_of_its_value(grid):
    folder, recs, _, _, _ = grid
    html = (folder / "ledger.html").read_text()
    data = json.loads(
        re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
        .group(1)
        .replace("<\\/", "</")
    )
    pool = data["pool"]
    for r in recs:
        rows = [
            line
            for line in (folder / r["evidence_dir"] / "RUN.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith(("| field |", "|---"))
        ]
        shown = {}
        for line in rows:
            field, value, rule, _ = [c.strip() for c in line.strip("|").split(" | ", 3)]
            shown[field] = (value, rule)
        assert set(shown) == set(cls(r)), r["run_id"]
        for field, value in cls(r).items():
            text, rule = shown[field]
            assert text == (value if isinstance(value, str) else json.dumps(value)), (r["run_id"], field)
            assert rule.startswith(_rule_of(field, value).replace("|", "/")), (r["run_id"], field, rule)
            assert "no rule" not in rule
        page_rules = {pool[f]: (pool[v], pool[rule]) for f, v, rule, *_ in data["pages"][r["run_id"]][4]}
        for field, value in cls(r).items():
            assert page_rules[field][1].startswith(_rule_of(field, value)), (r["run_id"], field)


def test_fault_runs_name_fault_call_reaction_and_stderr(grid):
    folder, recs, _, _, _ = grid
    faulted = [r for r in recs if r["faults"]["fault"]]
    assert faulted
    for r in faulted:
        text = (folder / r["evidence_dir"] / "RUN.md").read_text()
        fault = text[text.index("## Fault") :]
        f = r["faults"]
        assert f"fault: {f['fault']}" in fault and f["reaction"] in fault and "- stderr tail:" in fault
        if f["fault_call"] is not None:
            assert f"at call {f['fault_call']}" in fault


def test_terminal_summary_fits_80_columns(grid):
    from claimgrid.ledger import terminal_summary

    folder = grid[0]
    lines = terminal_summary(folder)
    assert all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    assert "LEDGER.md" in text and "ledger.html" in text
    recs = grid[1]
    cells = {(r["task"], r["content"], r["swap"], r["model"], r["repeat"]) for r in recs}
    assert f"{len(recs)} runs ({len(cells)} cells × " in text
