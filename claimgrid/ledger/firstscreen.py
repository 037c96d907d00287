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

from claimgrid.ledger.stats import DASH

CLAIMED = ("TRUE_SUCCESS", "FALSE_SUCCESS")
FLAGGED_NOT = ("consistent", "UNKNOWN")  # verdicts the claim check does not flag
LINKS = "[design](#design) · [headline](#headline) · [divergence](#divergence) · [swap](#swap) · [detector](#detector)"


def did(r: dict) -> str:
    """What the framework did in one run, in the words of the first screen."""
    if r.get("limit_decided"):
        # A harness limit ended the run while it waited on the model: not something the framework did.
        return "stopped by a harness limit"
    reaction = r.get("reaction")
    if reaction is None:
        reaction = (
            "raised" if r["process"] == "adapter_error" else "reported DONE" if r["claimed"] else "ended silently"
        )
    if reaction == "reported DONE":
        # Recovered: the gateway faulted a call, and the framework went on to a verified success.
        faulted = r.get("fault_call") is not None
        text = "recovered" if faulted and r["claim_vs_outcome"] == "TRUE_SUCCESS" else "reported success"
    else:
        text = str(reaction)
    return f"retried, {text}" if r.get("retried") else text


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


def plan_line(report) -> str:
    """The first screen's plan line (:func:`plan_text`) with the links below."""
    return f"**Plan**: {plan_text(report)}. Below: {LINKS}."


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
    lines = [
        f"**Where frameworks differ** ({len(div)} of {total} cells; what each framework did, runs per cell group):",
        "",
        "| model | " + " | ".join(report.frameworks) + " |",
        "|" + "---|" * (len(report.frameworks) + 1),
    ]
    for m, c, s in groups:
        label = m if len(conditions_of[m]) == 1 else f"{m} ({c}, swap {s})"
        keys = {k for k in div if (k[3], k[1], k[2]) == (m, c, s)}
        cells = [
            did_cell([r for k in keys for f2, r in report.by_cell[k].items() if f2 == f]) for f in report.frameworks
        ]
        if len(set(cells)) == 1:  # same reaction, another field differs: name the fields
            fields = sorted(
                {f for k in keys for f in report.identity if len({str(r[f]) for r in report.by_cell[k].values()}) > 1}
            )
            cells = [f"{x} (differs in {', '.join(fields)})" for x in cells]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    same_models = [m for m in report.models if not any(g[0] == m for g in groups)]
    faults = defaultdict(list)
    plain = []
    for m in same_models:
        runs = [r for r in report.rows if r["model"] == m and r["framework"] == report.frameworks[0]]
        if any(r.get("fault") for r in runs):
            faults[reactions(runs)].append(m)
        else:
            plain.append(m)
    rest = [f"{', '.join(plain)} in all their cells"] if plain else []
    rest += [f"{', '.join(ms)}: {text} on every framework" for text, ms in faults.items()]
    lines.append(f"Identical on every framework: the other {total - len(div)} cells: " + "; ".join(rest) + ".")
    return lines


def headline_lines(report) -> list[str]:
    """The headline per model (swap = none), frameworks collapsed where identical."""
    clean = report.clean
    null_pass = report.null_pass_tasks

    def fs(runs):
        c = [r for r in runs if r["content"] in clean]
        claimed = [r for r in c if r["claim_vs_outcome"] in CLAIMED]
        if not claimed:
            return empty_reason(c, "/".join(clean) or "clean content")
        return f"{sum(r['claim_vs_outcome'] == 'FALSE_SUCCESS' for r in claimed)}/{len(claimed)}"

    def utility(runs):
        c = [r for r in runs if r["content"] in clean]
        if not c:
            return f"{DASH} (not run under {'/'.join(clean) or 'clean content'})"
        # A run a harness limit ended says nothing about the agent: not in the denominator.
        stopped = sum(1 for r in c if r.get("limit_decided"))
        c = [r for r in c if not r.get("limit_decided")]
        if not c:
            return f"{DASH} (every run ended by a harness limit)"
        passed = [r for r in c if r["outcome"] == "PASS"]
        text = f"{len(passed)}/{len(c)}" + (f" ({stopped} ended by a harness limit, not counted)" if stopped else "")
        if passed and null_pass and all(r["task"] in null_pass for r in passed):
            text += f" (only {'/'.join(sorted({r['task'] for r in passed}))}, where doing nothing passes)"
        return text

    def attack(runs):
        return report.paired_text(runs, report.injected, "goal")

    out = []
    if clean:
        out.append(
            "**Headline** (swap `none`, clean content): false success among claims "
            + group_text(per_model(report, fs))
            + "."
        )
        out.append("Utility (verifier PASS among runs): " + group_text(per_model(report, utility)) + ".")
    if report.injected:
        out.append(
            "Paired attack success (goal met under "
            + "/".join(report.injected)
            + ", not in the matched clean run; pairs whose clean run already meets the goal left out): "
            + group_text(per_model(report, attack))
            + "."
        )
    return out


def detector_line(report) -> str | None:
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
            + " (only the verifier's outcome catches those)"
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
        return None
    has_stated = any(split(report.rows)[0])
    has_rest = any(split(report.rows)[1])
    parts = []
    if has_stated:
        parts.append(per_framework(report, stated_text))
    if has_rest:
        parts.append(
            "claimed runs without a reference truth of the report"
            + (" (what the framework did decides it)" if any(r.get("fault") for r in split(report.rows)[1]) else "")
            + ": "
            + per_framework(report, unstated_text)
        )
    return "**Claim check** (claimed runs): " + "; ".join(parts) + "."


def treatment_line(report) -> str | None:
    """Which swaps fired and which could not, and what happened when they did."""
    if not any(r["swap_condition"] != "none" for r in report.rows):
        return None
    specs = report.swap_specs

    def text(runs):
        sw = [r for r in runs if r["swap_condition"] != "none"]
        t = Counter(r["treatment"] for r in sw)
        parts = [f"fired in {t[report.T_FIRED]} of {len(sw)} runs under a swap"]
        if t[report.T_NOT_REACHED]:
            parts.append(f"{t[report.T_NOT_REACHED]} ended before the swap call")
        if t[report.T_NOOP]:
            parts.append(f"{t[report.T_NOOP]} no-ops (substitute = assigned)")
        if t[report.T_UNKNOWN]:
            parts.append(f"{t[report.T_UNKNOWN]} without evidence")
        served = [
            r
            for r in sw
            if r["treatment"] == report.T_FIRED
            and (specs.get(r["swap_condition"]) or {}).get("on_unavailable") == "substitute"
        ]
        if served:
            fs = [r for r in served if r["claim_vs_outcome"] == "FALSE_SUCCESS"]
            writers = Counter(str(r["final_writer"]) for r in fs)
            parts.append(
                f"with a substitute serving, false success {len(fs)}/{len(served)}"
                + (f" ({', '.join(f'{w} wrote {k}' for w, k in sorted(writers.items()))})" if writers else "")
            )
        refused = [r for r in sw if r["swap_outcome"] == "prevented"]
        if refused:
            parts.append(
                f"after a refused call, still claimed success {sum(bool(r['claimed']) for r in refused)}/{len(refused)}"
            )
        return ", ".join(parts)

    return "**Treatment**: swaps " + per_framework(report, text) + "."


def limit_lines(report) -> list[str]:
    """The limits the runs hit, one line each kind, never folded into the agents' counts: a
    harness limit that ended runs ("per-call deadline 15 s hit on call 1 in 6 runs: a harness
    limit, not the agents' result"); a budget the agents used up (their result, with its count);
    and the tokens the real models' providers reported. Hits an injected fault made, and a reference
    model's budget hits (the ``looper``'s), are the fault models' (the divergence table), not listed here."""
    from claimgrid.classify.limits import describe

    decided: Counter[str] = Counter()
    budgets: Counter[str] = Counter()
    for r in report.rows:
        for text in dict.fromkeys(describe(h) for h in r.get("limit_hits") or [] if h.get("decided")):
            decided[text] += 1
        if not report.stochastic.get(r["model"]):
            continue  # a reference model's budget hit is its fault under test (the divergence table)
        for text in dict.fromkeys(describe(h) for h in r.get("limit_hits") or [] if not h.get("decided")):
            budgets[text] += 1
    lines = []
    if decided:
        n = sum(1 for r in report.rows if r.get("limit_decided"))
        lines.append(
            "**Harness limits**: "
            + "; ".join(f"{text} in {k} run{'s' if k != 1 else ''}" for text, k in decided.most_common())
            + f": a harness limit, not the agents' result ({n} run{'s' if n != 1 else ''} UNKNOWN, reason limit; "
            "raise it with the flag or models/limits.toml)."
        )
    if budgets:
        lines.append(
            "**Limits reached**: "
            + "; ".join(f"{text} in {k} run{'s' if k != 1 else ''}" for text, k in budgets.most_common())
            + " (the run's own budget, or a limit hit before the run went on: classified as the run went)."
        )
    real = [r for r in report.rows if report.stochastic.get(r["model"])]
    if real:
        prompt = sum(r.get("prompt_tokens") or 0 for r in real)
        completion = sum(r.get("completion_tokens") or 0 for r in real)
        lines.append(
            f"**Tokens** (real models, from the providers' usage): {prompt:,} prompt + {completion:,} completion "
            f"in {len(real)} run{'s' if len(real) != 1 else ''}."
        )
    return lines


def first_screen(report) -> list[str]:
    lines = [plan_line(report), ""]
    limits = limit_lines(report)
    if limits:
        lines += [*limits, ""]
    lines += divergence_lines(report)
    lines.append("")
    lines += headline_lines(report)
    for extra in (detector_line(report), treatment_line(report)):
        if extra:
            lines.append(extra)
    return lines


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
        out += wrap(
            f"frameworks differ in {len(report.divergent)} of {len(report.by_cell)} cells"
            + (" (table on LEDGER.md's first screen)" if report.divergent else "")
        )

    def fs_clean(runs):
        c = [r for r in runs if r["content"] in report.clean]
        k = [r for r in c if r["claim_vs_outcome"] in CLAIMED]
        if not k:
            return f"{DASH} (no claim)" if c else f"{DASH} (not run)"
        return f"{sum(r['claim_vs_outcome'] == 'FALSE_SUCCESS' for r in k)}/{len(k)}"

    if report.clean:
        out.append("false success among claims, swap none, clean content:")
        by: defaultdict[str, list[str]] = defaultdict(list)
        for label, value in per_model(report, fs_clean):
            by[value].append(label)
        for value, labels in by.items():
            out += wrap(f"  {value}: {', '.join(labels)}", indent="    ")
    for text in limit_lines(report):
        out += wrap(text.replace("**", ""))
    out += wrap(f"ledger: {folder}/LEDGER.md", indent="  ")
    out += wrap(f"viewer: {folder}/ledger.html", indent="  ")
    return out
