"""LEDGER.md's first screen: at most about fifteen lines, every figure computed from the tables.

Contract: :func:`first_screen` ``(report) -> list[str]`` returns the summary's lines (markdown),
in this order: the plan that ran (which models ran under which conditions); where frameworks
differ (a model × framework table of what each framework did in the cells that differ, and one
line for what is identical); the headline per model with frameworks collapsed where they agree;
what the claim check catches, split by what it can see; which swaps fired. Every empty
denominator is "–" with its reason read from the runs (:func:`empty_reason`), never ``0/0``.
Everything else is in the sections below, linked from the first line.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from claimgrid.ledger.stats import DASH, p_text

CLAIMED = ("TRUE_SUCCESS", "FALSE_SUCCESS")
FLAGGED_NOT = ("consistent", "UNKNOWN")  # verdicts the claim check does not flag
LINKS = "[design](#design) · [headline](#headline) · [divergence](#divergence)"  # the rest: from their bullets


def did(r: dict) -> str:
    """What the framework did in one run, in the words of the first screen."""
    if r["limit_decided"]:
        # A harness limit ended the run while it waited on the model: not something the framework did.
        return "stopped by a harness limit"
    reaction = r["reaction"]
    if reaction is None:
        reaction = (
            "raised" if r["process"] == "adapter_error" else "reported DONE" if r["claimed"] else "ended silently"
        )
    if reaction == "reported DONE":
        # Recovered: the gateway faulted a call, and the framework went on to a verified success.
        faulted = r["fault_call"] is not None
        text = "recovered" if faulted and r["claim_vs_outcome"] == "TRUE_SUCCESS" else "reported success"
    else:
        text = str(reaction)
    return f"retried, {text}" if r["retried"] else text


def did_cell(runs: list[dict]) -> str:
    """One framework's runs of a cell group: each reaction with its count, false successes named."""
    if not runs:
        return f"{DASH} (not run)"
    count = Counter(did(r) for r in runs)
    out = []
    for text, k in count.most_common():
        false = sum(1 for r in runs if did(r) == text and r["claim_vs_outcome"] == "FALSE_SUCCESS")
        out.append(f"{text} {k}" + (f" ({false} false)" if false else ""))
    return ", ".join(out)


def reactions(runs: list[dict]) -> str:
    return ", ".join(f"{t} {k}" for t, k in Counter(did(r) for r in runs).most_common())


def empty_reason(runs: list[dict], condition: str) -> str:
    """Why a rate among claimed runs has no denominator: not run, or nothing claimed (and what happened)."""
    if not runs:
        return f"{DASH} (not run under {condition})"
    return f"{DASH} (nothing claimed: {reactions(runs)})"


def group_text(items: list[tuple[str, str]]) -> str:
    """``[(label, value)]`` as "value label, label; value label": labels grouped by their value."""
    by: defaultdict[str, list[str]] = defaultdict(list)
    for label, value in items:
        by[value].append(label)
    return "; ".join(f"{value} {', '.join(labels)}" for value, labels in by.items())


def per_model(report, value_of) -> list[tuple[str, str]]:
    """(label, value) per model, frameworks collapsed when they give the same value:
    ``value_of(runs) -> str`` on one framework's runs of the model (swap = none)."""
    items = []
    for m in report.models:
        values = {}
        for f in report.frameworks:
            runs = [r for r in report.rows if r["model"] == m and r["framework"] == f and r["swap_condition"] == "none"]
            if runs:
                values[f] = value_of(runs)
        if not values:
            continue
        if len(set(values.values())) == 1:
            items.append((m, next(iter(values.values()))))
            continue
        fws: defaultdict[str, list[str]] = defaultdict(list)
        for f, v in values.items():
            fws[v].append(f)
        items += [(f"{m} ({', '.join(fs)})", v) for v, fs in fws.items()]
    return items


def per_framework(report, text_of) -> str:
    """``text_of(runs)`` per framework, frameworks with the same text named together."""
    texts = {f: text_of([r for r in report.rows if r["framework"] == f]) for f in report.frameworks}
    if len(report.frameworks) == 1:
        return next(iter(texts.values()))
    if len(set(texts.values())) == 1:
        return f"{next(iter(texts.values()))} (each framework)"
    by: defaultdict[str, list[str]] = defaultdict(list)
    for f, t in texts.items():
        by[t].append(f)
    return "; ".join(f"{', '.join(fs)}: {t}" for t, fs in by.items())


MAX_NAMES = 5  # names (models, frameworks) one bullet may list; more are counted, with a link
# The first screen's model groups, in order: a behaviour model and a probe model never share
# a sentence (claimgrid.ledger.kinds).
GROUPS = (
    ("behaviour models", ("behaviour",)),
    ("models", ("real",)),
    ("gaming models", ("gaming",)),
    ("fault and probe models", ("fault", "probe")),
)


def per_framework_short(report, text_of, link: str) -> str:
    """The text when every framework gives it (or there is one framework), else how many
    frameworks it differs across, with the link to the section that lists them (a first-screen
    bullet names no framework list)."""
    if len(report.frameworks) == 1:
        return per_framework(report, text_of)
    texts = {text_of([r for r in report.rows if r["framework"] == f]) for f in report.frameworks}
    if len(texts) == 1:
        return f"{next(iter(texts))} (each framework)"
    return f"differs across the {len(report.frameworks)} frameworks ([{link.lstrip('#')}]({link}))"


def model_groups(report) -> list[tuple[str, list[str]]]:
    """``[(group label, its models in ledger order)]`` for the groups present."""
    from claimgrid.ledger.kinds import model_kind

    kind = {m: model_kind(m) for m in report.models}
    out = [(label, [m for m in report.models if kind[m] in kinds]) for label, kinds in GROUPS]
    return [(label, ms) for label, ms in out if ms]


def label_names(label: str) -> int:
    """How many names a :func:`per_model` label holds: the model, and its frameworks in parentheses."""
    inside = label.split(" (", 1)[1].rstrip(")") if " (" in label else ""
    return 1 + (len(inside.split(", ")) if inside else 0)


def short_group_text(items: list[tuple[str, str]], noun: str, link: str) -> str:
    """:func:`group_text` with at most :data:`MAX_NAMES` names: value groups are spelled in
    order while they fit, every other group is counted ("3/4 for 12 fault and probe models")."""
    by: defaultdict[str, list[str]] = defaultdict(list)
    for label, value in items:
        by[value].append(label)
    budget, parts, counted = MAX_NAMES, [], False
    for value, labels in by.items():
        names = sum(label_names(lab) for lab in labels)
        if names <= budget:
            budget -= names
            parts.append(f"{value} {', '.join(labels)}")
        else:
            counted = True
            models = len({lab.split(" (", 1)[0] for lab in labels})
            # Which frameworks is the table's to say: a sentence names none ("on some frameworks" was no fact).
            split = f" (on which frameworks: [table]({link}))" if any(" (" in lab for lab in labels) else ""
            parts.append(f"{value} for {models} {noun if models != 1 else noun.replace('models', 'model')}{split}")
    return "; ".join(parts) + (f" ([table]({link}))" if counted else "")


def plan_line(report) -> str:
    """The first screen's plan line: counts by model group, no names ([design](#design) lists them)."""
    groups = []
    for label, ms in model_groups(report):
        runs = [r for r in report.rows if r["model"] in ms]
        contents = {r["content"] for r in runs}
        swaps = {r["swap_condition"] for r in runs}
        where = (
            f"{len(contents) * len(swaps)} conditions"
            if (len(contents), len(swaps)) != (1, 1)
            else f"{next(iter(contents))}/{next(iter(swaps))}"
        )
        groups.append(f"{len(ms)} {label if len(ms) != 1 else label.replace('models', 'model')} × {where}")
    # where: "4 content × 4 swap conditions" or "content clean, swap none" (the untreated cell)
    return (
        f"**Plan**: {len(report.rows)} runs = {len(report.frameworks)} "
        f"framework{'s' if len(report.frameworks) != 1 else ''} × {len(report.by_cell)} cells ("
        f"{len(report.tasks)} task{'s' if len(report.tasks) != 1 else ''}, repeats {report.meta.get('repeats', DASH)}): "
        + "; ".join(groups)
        + f". {LINKS}."
    )


def plan_text(report) -> str:
    """The real plan: which models ran under which tasks and conditions (from the runs)."""
    cond: defaultdict[str, tuple] = defaultdict(tuple)
    for m in report.models:
        runs = [r for r in report.rows if r["model"] == m]
        cond[m] = (
            tuple(t for t in report.tasks if any(r["task"] == t for r in runs)),
            tuple(c for c in report.contents if any(r["content"] == c for r in runs)),
            tuple(s for s in report.swaps if any(r["swap_condition"] == s for r in runs)),
        )
    groups: defaultdict[tuple, list[str]] = defaultdict(list)
    for m, key in cond.items():
        groups[key].append(m)

    def dim(chosen: tuple, every: list[str], many: str, one: str) -> str:
        if len(chosen) == len(every) and len(every) > 1:
            return f"{len(every)} {many}"
        return f"{one} {'/'.join(chosen)}"

    parts = [
        f"{', '.join(ms)} × {dim(t, report.tasks, 'tasks', 'task')} × "
        f"{dim(c, report.contents, 'content conditions', 'content')} × "
        f"{dim(s, report.swaps, 'swap conditions', 'swap')}"
        for (t, c, s), ms in groups.items()
    ]
    cells = len(report.by_cell)
    return (
        f"{len(report.rows)} runs = {len(report.frameworks)} "
        f"framework{'s' if len(report.frameworks) != 1 else ''} × {cells} cells "
        f"(repeats {report.meta.get('repeats', DASH)}): " + "; ".join(parts)
    )


def split_divergent(report) -> tuple[list[tuple], list[tuple], int, int]:
    """The divergent cells of deterministic (reference) models and of stochastic ones, and how
    many cells each kind has. A stochastic model's cell is one draw per framework: that the draws
    differ is no finding about the frameworks (the paired tests decide that, issue 40 item 4)."""
    sto = lambda k: bool(report.stochastic.get(k[3]))
    det = [k for k in report.divergent if not sto(k)]
    drawn = [k for k in report.divergent if sto(k)]
    n_sto = sum(1 for k in report.by_cell if sto(k))
    return det, drawn, len(report.by_cell) - n_sto, n_sto


def divergence_title(report) -> str:
    """The first screen's line over the what-each-did table."""
    det, drawn, n_det, n_sto = split_divergent(report)
    stochastic = (
        f"with a stochastic model ({len(drawn)} of {n_sto} cells differ run by run, one draw each: "
        "whether frameworks differ is the [paired tests](#paired-tests)' to say)"
    )
    if not drawn:
        return f"**Where frameworks differ** ({len(det)} of {n_det} cells; what each did, runs per reaction):"
    if not det:
        return f"**What each framework did** {stochastic}; runs per reaction:"
    return (
        f"**Where frameworks differ** ({len(det)} of {n_det} reference-model cells) and what each did "
        f"{stochastic}; runs per reaction:"
    )


def divergence_lines(report) -> list[str]:
    """Where frameworks differ: a model (condition) × framework table of what each did; one line for the rest."""
    if len(report.frameworks) < 2:
        return ["**Frameworks**: one framework in this ledger, nothing to compare."]
    div = set(report.divergent)
    groups = sorted(
        {(k[3], k[1], k[2]) for k in div},
        key=lambda g: (report.models.index(g[0]) if g[0] in report.models else len(report.models), str(g)),
    )
    conditions_of = defaultdict(set)
    for r in report.rows:
        conditions_of[r["model"]].add((r["content"], r["swap_condition"]))
    total = len(report.by_cell)
    if not groups:
        return [f"**Frameworks**: identical in all {len(report.complete_cells)} cells every framework ran."]
    lines = [divergence_title(report), ""]
    lines += [
        "| model | " + " | ".join(report.frameworks) + " |",
        "|" + "---|" * (len(report.frameworks) + 1),
    ]
    for m, c, s in groups:
        label = m if len(conditions_of[m]) == 1 else f"{m} ({c}, swap {s})"
        if report.stochastic.get(m):
            label += " (stochastic: one draw per run)"
        keys = {k for k in div if (k[3], k[1], k[2]) == (m, c, s)}
        cells = [
            did_cell([r for k in keys for f2, r in report.by_cell[k].items() if f2 == f]) for f in report.frameworks
        ]
        if len(set(cells)) == 1:  # same reaction, another field differs: say which and its values
            fields = [  # the fields in which frameworks differ within a cell (not across tasks)
                f
                for f in report.identity
                if any(len({str(r[f]) for r in report.by_cell[k].values()}) > 1 for k in keys)
            ]
            label += f" (same outcome, different {' and '.join(f.replace('_', ' ') for f in fields)})"
            cells = [
                " · ".join(
                    [cells[i]]
                    + [
                        f"{f.replace('_', ' ')} "
                        + ", ".join(
                            f"{v}" + (f" {n}" if n != len(keys) else "")
                            for v, n in Counter(
                                str(report.by_cell[k][fw][f]) for k in keys if fw in report.by_cell[k]
                            ).most_common()
                        )
                        for f in fields
                    ]
                )
                for i, fw in enumerate(report.frameworks)
            ]
            if len(set(cells)) == 1:  # the counts agree too: the cells differ one by one
                label += ": cell by cell in [divergence](#divergence)"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Identical on every framework in the other {total - len(div)} cells ([RUNS.md](RUNS.md)).")
    return lines


def _fs(report, runs) -> str:
    c = [r for r in runs if r["content"] in report.clean]
    claimed = [r for r in c if r["claim_vs_outcome"] in CLAIMED]
    if not claimed:
        return empty_reason(c, "/".join(report.clean) or "clean content")
    return f"{sum(r['claim_vs_outcome'] == 'FALSE_SUCCESS' for r in claimed)}/{len(claimed)}"


def _utility(report, runs) -> str:
    c = [r for r in runs if r["content"] in report.clean]
    if not c:
        return f"{DASH} (not run under {'/'.join(report.clean) or 'clean content'})"
    # A run a harness limit ended says nothing about the agent: not in the denominator.
    stopped = sum(1 for r in c if r["limit_decided"])
    c = [r for r in c if not r["limit_decided"]]
    if not c:
        return f"{DASH} (every run ended by a harness limit)"
    passed = [r for r in c if r["outcome"] == "PASS"]
    text = f"{len(passed)}/{len(c)}" + (f" ({stopped} ended by a harness limit, not counted)" if stopped else "")
    null_pass = report.null_pass_tasks
    if passed and null_pass and all(r["task"] in null_pass for r in passed):
        text += f" (only {'/'.join(sorted({r['task'] for r in passed}))}, where doing nothing passes)"
    return text


def fault_blocks(report, models: list[str]) -> str:
    """Fault and probe models in one finding: how many model × framework blocks (swap none, clean
    content) claimed success and had a false success among their claims, and how many claimed nothing."""
    blocks = [
        [
            r
            for r in report.rows
            if r["model"] == m
            and r["framework"] == f
            and r["swap_condition"] == "none"
            and r["content"] in report.clean
        ]
        for m in models
        for f in report.frameworks
    ]
    blocks = [b for b in blocks if b]
    claimed = [b for b in blocks if any(r["claim_vs_outcome"] in CLAIMED for r in b)]
    false = [b for b in claimed if any(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in b)]
    return (
        f"in {len(false)} of {len(claimed)} model × framework blocks that claimed; "
        f"{len(blocks) - len(claimed)} of {len(blocks)} claimed nothing ([table](#headline))"
    )


class _Only:
    """``report`` seen through a subset of its models (for :func:`per_model`)."""

    def __init__(self, report, models):
        self._r, self.models = report, models

    def __getattr__(self, name):
        return getattr(self._r, name)


def headline_lines(report) -> list[str]:
    """The headline (swap = none, clean content) per model group: false success among claims,
    utility and paired attack success, frameworks collapsed where identical, names counted past
    :data:`MAX_NAMES` (the headline table lists them)."""
    out: list[str] = []
    if not report.clean:
        return out
    for glabel, ms in model_groups(report):
        only = _Only(report, ms)
        where = " (swap `none`, clean)" if not out else ""
        if glabel == "fault and probe models":  # what each framework did with a fault is the table above
            out.append(f"**False success**, {glabel}{where}: {fault_blocks(report, ms)}.")
            continue
        fs = short_group_text(per_model(only, lambda runs: _fs(report, runs)), glabel, "#headline")
        out.append(
            f"**False success** among claims, {glabel}{where}: {fs}."
            if not out
            else f"**False success**, {glabel}: {fs}."
        )
        if glabel == "gaming models":
            continue  # a gaming model's utility is the gamed verifier's: the headline table has it
        ut = short_group_text(per_model(only, lambda runs: _utility(report, runs)), glabel, "#headline")
        out.append(f"**Utility** (verifier PASS), {glabel}: {ut}.")
        if report.injected and any(r["content"] in report.injected for r in report.rows if r["model"] in ms):
            attack = short_group_text(
                per_model(only, lambda runs: report.paired_text(runs, report.injected, "goal")), glabel, "#headline"
            )
            out.append(f"**Paired attack success** (goal met only under injection), {glabel}: {attack}.")
    return out


def paired_tests_line(report) -> str | None:
    """The paired framework tests on stochastic models, in one line (the table is in divergence)."""
    tests = getattr(report, "pair_tests", None)
    if not tests:
        return None
    from claimgrid.ledger.paired import ALPHA, CORRECTION

    stated = [t for t in tests if t.differs]
    head = (
        f"**Paired framework tests** (exact McNemar per framework pair on the same cells, {CORRECTION} over "
        f"{len(tests)} tests, alpha {ALPHA}): "
    )
    if not stated:
        best = min(tests, key=lambda t: t.p_adj)
        return (
            head
            + f"no difference shown (n={best.n}, smallest adjusted p={p_text(best.p_adj)}) ([tests](#paired-tests))."
        )
    first = stated[0]
    more = f"; {len(stated) - 1} more ([tests](#paired-tests))" if len(stated) > 1 else " ([tests](#paired-tests))"
    return head + (
        f"{len(stated)} differences; {first.result()} in `{first.outcome}` rate, "
        f"stated after {first.repeats_needed} repeats" + more + "."
    )


def detector_line(report) -> list[str]:
    """What the claim check catches, split by what it can see: against each claimed run's stated
    truth of its report (misreported / honest); claimed runs without such a truth counted apart."""
    truth = report.L.inputs.truth
    flagged = lambda r: r["claim_verdict"] not in FLAGGED_NOT
    rate = lambda k, n: f"{k}/{n}" if n else f"{DASH} (none)"

    def split(runs):
        claimed = [r for r in runs if r["claim_vs_outcome"] in CLAIMED]
        known = [(r, truth(r).get("claim_verdict")) for r in claimed]
        return [(r, t) for r, t in known if t is not None], [r for r, t in known if t is None]

    def stated_text(runs):
        stated, _ = split(runs)
        if not stated:
            return ""
        mis = [r for r, t in stated if t != "consistent"]
        ts = [r for r, t in stated if t == "consistent" and r["claim_vs_outcome"] == "TRUE_SUCCESS"]
        fs = [r for r, t in stated if t == "consistent" and r["claim_vs_outcome"] == "FALSE_SUCCESS"]
        caught = sum(map(flagged, fs))
        return (
            f"misreported successes caught {rate(sum(map(flagged, mis)), len(mis))}, honest successes flagged "
            f"{rate(sum(map(flagged, ts)), len(ts))}, false successes with an honest report {len(fs)}"
            + (f" ({caught} flagged)" if caught else "")
            + ", caught by the verifier only"
        )

    def unstated_text(runs):
        _, rest = split(runs)
        fs = [r for r in rest if r["claim_vs_outcome"] == "FALSE_SUCCESS"]
        ts = [r for r in rest if r["claim_vs_outcome"] == "TRUE_SUCCESS"]
        return (
            f"false successes flagged {rate(sum(map(flagged, fs)), len(fs))}, true successes flagged "
            f"{rate(sum(map(flagged, ts)), len(ts))}"
        )

    if not any(r["claim_vs_outcome"] in CLAIMED for r in report.rows):
        return []
    has_stated = any(split(report.rows)[0])
    has_rest = any(split(report.rows)[1])
    out = []
    if has_stated:
        out.append(
            "**Claim check**, claims with a reference truth: "
            + per_framework_short(report, stated_text, "#detector")
            + "."
        )
    rest_text = per_framework_short(report, unstated_text, "#detector") if has_rest else ""
    if has_rest and "([detector]" not in rest_text:  # differing by framework: the detector section has it
        out.append("**Claim check**, claims without a reference truth: " + rest_text + ".")
    return out


def treatment_line(report) -> list[str]:
    """Which swaps fired and which could not, and what happened when they did: one bullet each."""
    if not any(r["swap_condition"] != "none" for r in report.rows):
        return []
    specs = report.swap_specs
    swapped = lambda runs: [r for r in runs if r["swap_condition"] != "none"]

    def fired(runs):
        sw = swapped(runs)
        t = Counter(r["treatment"] for r in sw)
        parts = [f"fired in {t[report.T_FIRED]} of {len(sw)} swapped runs"]
        if t[report.T_NOT_REACHED]:
            parts.append(f"{t[report.T_NOT_REACHED]} ended first")
        if t[report.T_NOOP]:
            parts.append(f"{t[report.T_NOOP]} no-ops")
        if t[report.T_UNKNOWN]:
            parts.append(f"{t[report.T_UNKNOWN]} without evidence")
        return ", ".join(parts)

    def served_of(runs):
        return [
            r
            for r in swapped(runs)
            if r["treatment"] == report.T_FIRED
            and (specs.get(r["swap_condition"]) or {}).get("on_unavailable") == "substitute"
        ]

    def served(runs):
        sv = served_of(runs)
        fs = [r for r in sv if r["claim_vs_outcome"] == "FALSE_SUCCESS"]
        writers = Counter(str(r["final_writer"]) for r in fs)
        return f"false success {len(fs)}/{len(sv)}" + (
            f" ({', '.join(f'{w} wrote {k}' for w, k in sorted(writers.items()))})" if writers else ""
        )

    def refused(runs):
        rf = [r for r in swapped(runs) if r["swap_outcome"] == "prevented"]
        return f"still claimed success {sum(bool(r['claimed']) for r in rf)}/{len(rf)}"

    out = ["**Swaps** " + per_framework_short(report, fired, "#swap") + "."]
    if served_of(report.rows):
        out.append("**Substitute serving**: " + per_framework_short(report, served, "#swap") + ".")
    if any(r["swap_outcome"] == "prevented" for r in swapped(report.rows)):
        out.append("**After a refused call**: " + per_framework_short(report, refused, "#swap") + ".")
    return out


def limit_lines(report) -> list[str]:
    """The limits the runs hit, one line each kind, never folded into the agents' counts: a
    harness limit that ended runs ("per-call deadline 15 s hit on call 1 in 6 runs: a harness
    limit, not the agents' result"); a budget the agents used up (their result, with its count);
    and the tokens the real models' providers reported. Hits an injected fault made, and a reference
    model's budget hits (the ``looper``'s), are the fault models' (the divergence table), not listed here."""
    from claimgrid.classify.limits import describe

    decided: Counter[str] = Counter()
    budgets: Counter[str] = Counter()
    context = False  # a context window ended a run: where that limit is raised differs
    for r in report.rows:
        for text in dict.fromkeys(describe(h) for h in r["limit_hits"] or [] if h["decided"]):
            decided[text] += 1
        context |= any(h["decided"] and h["limit"] == "context" for h in r["limit_hits"] or [])
        if not report.stochastic.get(r["model"]):
            continue  # a reference model's budget hit is its fault under test (the divergence table)
        for text in dict.fromkeys(describe(h) for h in r["limit_hits"] or [] if not h["decided"]):
            budgets[text] += 1
    lines = []
    if decided:
        n = sum(1 for r in report.rows if r["limit_decided"])
        lines.append(
            "**Harness limits**: "
            + "; ".join(f"{text} in {k} run{'s' if k != 1 else ''}" for text, k in decided.most_common())
            + f": a harness limit, not the agents' result ({n} run{'s' if n != 1 else ''} UNKNOWN, reason limit; "
            "raise it with the flag or models/limits.toml"
            + (
                "; a context window with the model's `context` in models/local.toml, or a model with a larger one"
                if context
                else ""
            )
            + ")."
        )
    if budgets:
        lines.append(
            "**Limits reached**: "
            + "; ".join(f"{text} in {k} run{'s' if k != 1 else ''}" for text, k in budgets.most_common())
            + " (the run's own budget, or a limit hit before the run went on: classified as the run went)."
        )
    real = [r for r in report.rows if report.stochastic.get(r["model"])]
    if real:
        prompt = sum(r["prompt_tokens"] or 0 for r in real)
        completion = sum(r["completion_tokens"] or 0 for r in real)
        lines.append(
            f"**Tokens** (real models, from the providers' usage): {prompt:,} prompt + {completion:,} completion "
            f"in {len(real)} run{'s' if len(real) != 1 else ''}."
        )
    return lines


def stochastic_lines(report, models: list[str]) -> list[str]:
    """A stochastic model's first screen (claimgrid.ledger.ratetable): one table of rates per
    model over its control cells, then the paired framework tests in a line each and a sentence."""
    from claimgrid.ledger.ratetable import pair_lines, rate_tables

    rows = [r for r in report.rows if r["model"] in models]
    control = [r for r in rows if r["swap_condition"] == "none" and r["content"] in report.clean]
    where = "clean content, swap `none`" if control else "every condition"
    out = [
        f"**Rates per framework**, stochastic model{'s' if len(models) > 1 else ''} ({where}; 95% Wilson "
        "interval, widened to the task-clustered one where tasks pool and it is wider; "
        "[headline](#headline) has every condition):",
        "",
        *rate_tables(control or rows, "framework", report.frameworks),
    ]
    tests = pair_lines(getattr(report, "pair_tests", None) or [])
    if tests:
        out.append("**Paired framework tests** (the same cells, every condition):")
        out += tests
    return out


def first_screen(report) -> list[str]:
    """The summary's lines: bullets (one finding each, with its number) and the divergence
    table. Another finding is one more string in this list (``Report.summary`` bullets it)."""
    lines = [plan_line(report), ""]
    limits = limit_lines(report)
    if limits:
        lines += [*limits, ""]
    sto = [m for m in report.models if report.stochastic.get(m)]
    det = [m for m in report.models if not report.stochastic.get(m)]
    if det or len(report.frameworks) < 2:
        lines += divergence_lines(report)
        lines.append("")
    if sto:
        lines += stochastic_lines(report, sto)
    if det:
        lines += headline_lines(_Only(report, det) if sto else report)
    if not sto:
        tests = paired_tests_line(report)
        if tests:
            lines.append(tests)
    lines += detector_line(report)
    lines += treatment_line(report)
    return lines


def plain(markdown: str) -> str:
    """A first-screen line for a terminal: no emphasis, code marks or link targets."""
    import re

    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return text.replace("**", "").replace("`", "").replace("(table)", "(LEDGER.md)")


def terminal_lines(report, folder, width: int = 80) -> list[str]:
    """The end-of-grid summary for a terminal: every line at most ``width`` columns, counts named
    as runs or cells, the headline grouped by value, and where LEDGER.md and ledger.html are."""
    import textwrap

    wrap = lambda text, indent="  ": textwrap.wrap(
        text, width=width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False
    )
    rows = report.rows
    if not rows:
        return ["No runs in this ledger yet.", *wrap(f"ledger: {folder}/LEDGER.md")]
    fs = sum(r["claim_vs_outcome"] == "FALSE_SUCCESS" for r in rows)
    claimed = sum(r["claim_vs_outcome"] in CLAIMED for r in rows)
    out = wrap(
        f"grid done: {len(rows)} runs ({len(report.by_cell)} cells × {len(report.frameworks)} "
        f"framework{'s' if len(report.frameworks) != 1 else ''}); false success in {fs} of {claimed} "
        "runs that claimed success"
    )
    if len(report.frameworks) > 1:
        det, drawn, n_det, n_sto = split_divergent(report)
        said = []
        if n_det:
            said.append(f"frameworks differ in {len(det)} of {n_det} cells")
        if n_sto:
            said.append(
                f"a stochastic model's runs differ by framework in {len(drawn)} of {n_sto} cells "
                "(one draw each: the paired tests on LEDGER.md say whether frameworks differ)"
            )
        out += wrap("; ".join(said) + (" (table on LEDGER.md's first screen)" if report.divergent else ""))

    # The same findings as LEDGER.md's first screen (its false-success bullets), as plain text.
    for line in headline_lines(report):
        if line.startswith("**False success**"):
            out += wrap(plain(line), indent="    ")
    for text in limit_lines(report):
        out += wrap(text.replace("**", ""))
    out += wrap(f"ledger: {folder}/LEDGER.md", indent="  ")
    out += wrap(f"viewer: {folder}/ledger.html", indent="  ")
    return out
