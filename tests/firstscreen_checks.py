"""What LEDGER.md's first section must hold, computed from its text (issue 42 item 6).

:func:`problems` ``(md, kinds) -> list[str]``: one line per broken rule, empty when the first
section (``## 0. Summary`` up to the next heading) has at most :data:`MAX_WORDS` words outside
table rows, at most :data:`MAX_LINES_BEFORE_TABLE` lines before the framework table, every
bullet has a number and at most :data:`MAX_NAMES` names (models and frameworks, as whole words),
no sentence names both a behaviour model and a probe model, and every table row whose
framework cells read the same says in words what differs ("same outcome, different ...").
``kinds`` maps each name to its kind: a model's (claimgrid.ledger.kinds) or ``"framework"``.
"""

from __future__ import annotations

import re

MAX_WORDS, MAX_LINES_BEFORE_TABLE, MAX_NAMES = 250, 15, 5


def first_section(md: str) -> list[str]:
    start = md.index("## 0. Summary")
    end = md.index("\n## ", start + 1)
    body = md[start:end].splitlines()[1:]
    return [line for line in body if not line.startswith("<a id=")]


def names_in(text: str, kinds: dict[str, str]) -> set[str]:
    # Link targets and inline code are not names a reader reads.
    text = re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "", text))
    return {n for n in kinds if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)}


def problems(md: str, kinds: dict[str, str]) -> list[str]:
    lines = first_section(md)
    out = []
    prose = [line for line in lines if line.strip() and not line.startswith("|")]
    words = sum(len(line.split()) for line in prose)
    if words > MAX_WORDS:
        out.append(f"{words} words outside tables (> {MAX_WORDS})")
    table_at = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    before = [line for line in (lines[:table_at] if table_at is not None else lines) if line.strip()]
    if len(before) > MAX_LINES_BEFORE_TABLE:
        out.append(f"{len(before)} lines before the framework table (> {MAX_LINES_BEFORE_TABLE})")
    for line in prose:
        if not line.startswith("- "):
            continue
        if not re.search(r"\d", line):
            out.append(f"bullet without a number: {line[:60]}")
        named = names_in(line, kinds)
        if len(named) > MAX_NAMES:
            out.append(f"bullet with {len(named)} names (> {MAX_NAMES}): {line[:60]}")
        for sentence in re.split(r"(?<=[.;:])\s+", line):
            ks = {kinds[n] for n in names_in(sentence, kinds)}
            if {"behaviour", "probe"} <= ks:
                out.append(f"a behaviour and a probe model in one sentence: {sentence[:60]}")
    # a table's rows: its header and its delimiter line (`|---|` or `| --- |`) left out
    rows = [line for line in lines if line.startswith("|") and not re.fullmatch(r"\|[\s:|-]+\|", line.strip())][1:]
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        label, values = cells[0], cells[1:]
        if len(values) > 1 and len(set(values)) == 1 and "same outcome, different" not in label:
            out.append(f"row of identical cells without its difference: {label}")
        if "differs in" in row and "same outcome" not in label:
            out.append(f"row names differing fields without their values: {label}")
    return out
