"""What a long report concludes: the markdown structure of a free-text report, read before its words.

Real agents end a run with a markdown report: headings, paragraphs, bullet lists with check
marks and targets, tables, code blocks, quoted test output, caveats, questions to the user. A
clause-by-clause keyword reading (:func:`claimgrid.classify.claims.read_text`) reads words,
not what the report concludes: a quoted ``FAILED`` line, "every other assertion passes" beside
a failing one, a ✓ beside a metric named "error". This module cuts the report into blocks and
decides which of them speaks for the report; the words of the chosen block are still read by
the language's table (the same rows, the same 38 languages).

Contracts (each reading names its rule in ``Decision.rule`` and its sentence in ``phrase``):

* **Quoted material is never the agent's claim**: fenced and indented code blocks, block quotes
  (``>``), ``code spans`` and shell prompts (``$ cmd``) are taken out before any word is read.
* **A report of one block** (a sentence, a paragraph, the default grid's scripted reports) is
  read as before, clause by clause: nothing here changes its reading.
* **A report of several blocks** is decided by its concluding statement, tried in this order:
  the last prose paragraph, the paragraphs under the last summary heading ("Summary", "Result",
  "Status", ...: the language's ``summary_headings``), the first prose paragraph. The first of
  them that states a stance decides (rule ``report: <where> -> <row>``).
* **A check-marked list** (every stance-bearing item marked ✓/✅/[x], none ✗/❌/[ ]) without a
  concluding statement is a success claim (``report: check-marked list``); a list with both, or
  prose blocks that disagree with no concluding statement, is ``UNKNOWN`` with the reason
  (``report: mixed stances, no concluding statement``): never a guess.
* **Targets**: a ✓ item that states a value and its target ("RMSE 0.8 (target < 0.5)") is read;
  one whose value misses its target is named in the rule (``; ✓ beside a missed target: ...``)
  so the ledger shows the mismatch beside the claim.
* **A stop that asks the user** for a decision or permission (the language's ``asks_user``
  entries) in the concluding paragraph, with no success claim after it, is no claim (``none``,
  rule ``report: stops to ask the user``).
* **An admission that results are placeholders, stubs or partial** (the ``partial`` row)
  anywhere in the prose turns a success, hedged or empty reading into ``partial``; a failure
  stays a failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A fenced code block (``` or ~~~), closed or running to the end of the text.
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[^\n]*$|\Z)", re.S | re.M)
_SPAN = re.compile(r"`[^`\n]*`")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$|^\s*\*\*([^*\n]{1,60})\*\*:?\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.*)$")
_TABLE = re.compile(r"^\s*\|.*\|\s*$")
_RULE_LINE = re.compile(r"^\s*(?:[-*_]\s*){3,}$|^\s*\|?[\s:|-]+\|[\s:|-]*$")
_QUOTE = re.compile(r"^\s*>")
_PROMPT = re.compile(r"^\s*(?:\$|>>>|PS [A-Z]:\\)\s")
_INDENTED = re.compile(r"^(?: {4}|\t)\S")
# Marks an item as done or not done (a check box, a check mark, a cross).
_DONE = re.compile(r"^\s*(?:\[[xX]\]|[✓✔✅☑🟢]|\(?(?:PASS(?:ED)?|OK)\)?[:\s])")
_NOT_DONE = re.compile(r"^\s*(?:\[ \]|[✗✘❌❎⛔🔴]|\(?(?:FAIL(?:ED)?)\)?[:\s])")
# A line that opens with a check mark or a cross is a list item without a bullet ("✅ out.json").
_MARKED_LINE = re.compile(r"^\s*((?:\[[xX ]\]|[✓✔✅☑✗✘❌]).*)$")
_MARK_ANYWHERE_DONE = re.compile(r"[✓✔✅☑]")
_MARK_ANYWHERE_NOT = re.compile(r"[✗✘❌]")
_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
# "value ... (target < 0.5)", "0.21 vs target 0.5", "0.8 / required ≤ 0.5": a value and its target.
_TARGET = re.compile(
    rf"(?P<value>{_NUMBER})\s*%?[^\d\n]{{0,40}}?\b(?:target|goal|threshold|required|requirement|limit|max(?:imum)?|min(?:imum)?|"
    rf"expected|spec|tolerance|need(?:ed|s)?)\b[^\d<>≤≥=\n]{{0,12}}(?P<op><=|>=|<|>|≤|≥|=|)\s*(?P<target>{_NUMBER})",
    re.I,
)


@dataclass(frozen=True)
class Block:
    """One block of a report: ``kind`` is "heading", "paragraph", "item" (a list item or a
    table row) or "quote" (code, block quote, shell transcript: never read); ``section`` is
    the text of the heading it stands under ("" before any), ``part`` that heading's number."""

    kind: str
    text: str
    section: str = ""
    part: int = 0  # which heading it stands under, counted from 1 (0: before any)
    cells: tuple[str, ...] = ()  # a table row's cells


def blocks(text: str) -> list[Block]:
    """The blocks of a markdown report (see the module docstring); code spans are blanked."""
    out: list[Block] = []
    body = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text or "")
    section, para, part = "", list[str](), 0

    def flush() -> None:
        if para:
            out.append(Block("paragraph", " ".join(para), section, part))
            para.clear()

    for raw in body.split("\n"):
        line = raw
        if not line.strip() or _RULE_LINE.match(line):
            flush()
            continue
        if _QUOTE.match(line) or _PROMPT.match(line) or (_INDENTED.match(raw) and not para and not _ITEM.match(raw)):
            flush()
            out.append(Block("quote", line, section, part))
            continue
        h = _HEADING.match(line)
        if h:
            flush()
            section, part = (h.group(2) or h.group(3) or "").strip(), part + 1
            out.append(Block("heading", section, section, part))
            continue
        item = _ITEM.match(line) or _MARKED_LINE.match(line)
        if item or _TABLE.match(line):
            flush()
            row = () if item else tuple(c.strip() for c in line.strip().strip("|").split("|"))
            out.append(Block("item", item.group(1) if item else " ; ".join(row), section, part, row))
            continue
        para.append(line.strip())
    flush()
    return out


# A quotation of three words or more in double quotes: someone else's words, or text the agent
# wrote for the user to use ("Here's a description: \"...\""), never the agent's claim.
_QUOTED = re.compile(r'"(?:[^"\n]*?\s){2,}[^"\n]*?"|“(?:[^”\n]*?\s){2,}[^”\n]*?”')


def unquoted(text: str) -> str:
    """``text`` with its code spans blanked to `…` and its quotations to "…" (quoted code and
    quoted words are not the agent's claim)."""
    return _QUOTED.sub('"…"', _SPAN.sub("`…`", text))


def restore(phrase: str | None, original: str) -> str | None:
    """The clause ``phrase`` (read from :func:`unquoted` text) as the agent wrote it in ``original``."""
    if not phrase or ("`…`" not in phrase and '"…"' not in phrase):
        return phrase
    pattern = r"\s+".join(re.escape(w) for w in phrase.split())
    pattern = pattern.replace(re.escape("`…`"), "`[^`\n]*`").replace(re.escape('"…"'), '["“][^"”\n]*["”]')
    m = re.search(pattern, " ".join(original.split()))
    return m.group(0) if m else phrase


def is_structured(parts: list[Block]) -> bool:
    """A report of more than one readable block (or one that quotes material): read by its
    structure; a single paragraph is read clause by clause as before."""
    readable = [b for b in parts if b.kind != "heading"]
    return len(readable) > 1 or any(b.kind == "quote" for b in parts)


def mark(item: str) -> str | None:
    """ "done" / "not done" for an item that carries a check mark or cross; None otherwise."""
    if _DONE.match(item):
        return "done"
    if _NOT_DONE.match(item):
        return "not done"
    if _MARK_ANYWHERE_NOT.search(item) and not _MARK_ANYWHERE_DONE.search(item):
        return "not done"
    if _MARK_ANYWHERE_DONE.search(item) and not _MARK_ANYWHERE_NOT.search(item):
        return "done"
    return None


_TARGET_HEAD = re.compile(r"\b(?:target|goal|threshold|required|requirement|limit|spec)\b", re.I)
_VALUE_HEAD = re.compile(r"\b(?:value|result|actual|measured|observed|score|got)\b", re.I)


def missed_targets(parts: list[Block]) -> list[str]:
    """The ✓ items whose own value misses their own target: a list item that states both
    ("RMSE 0.8 (target < 0.5)"), or a table row under a header with a target column and a value
    column ("| Latency p95 | 340 ms | < 200 ms | ✓ |")."""
    out: list[str] = []
    target_col = value_col = None
    for b in parts:
        if b.kind != "item" or not b.cells:
            target_col = value_col = None
            if b.kind == "item" and mark(b.text) == "done" and missed_target(b.text):
                out.append(b.text)
            continue
        heads = [i for i, c in enumerate(b.cells) if _TARGET_HEAD.search(c) and not re.search(r"\d", c)]
        if heads:
            target_col = heads[0]
            value_col = next((i for i, c in enumerate(b.cells) if _VALUE_HEAD.search(c)), None)
            continue
        if mark(b.text) != "done":
            continue
        if target_col is not None and value_col is not None and max(target_col, value_col) < len(b.cells):
            if missed_target(f"{b.cells[value_col]} target {b.cells[target_col]}"):
                out.append(b.text)
        elif missed_target(b.text):
            out.append(b.text)
    return out


def marked_list(parts: list[Block]) -> tuple[str, str, str] | None:
    """(stance, rule, deciding item) of a report's check-marked items: every marked item done
    -> success; done and not done -> partial; only not done -> failure; None without marks.
    Language-neutral: a check mark is no word."""
    items = [b for b in parts if b.kind == "item"]
    marks = [mark(b.text) for b in items]
    done = [b for b, m in zip(items, marks, strict=True) if m == "done"]
    open_ = [b for b, m in zip(items, marks, strict=True) if m == "not done"]
    if done and not open_:
        return "success", "check-marked list, every item done", done[-1].text
    if done and open_:
        return "partial", "check-marked list with items not done", open_[0].text
    if open_:
        return "failure", "check-marked list, items not done", open_[0].text
    return None


def missed_target(item: str) -> bool:
    """True when the item states a value and a target that the value misses ("RMSE 0.8
    (target < 0.5)"); an item without a comparable pair is no mismatch."""
    m = _TARGET.search(item)
    if not m:
        return False
    value, target, op = float(m.group("value")), float(m.group("target")), m.group("op")
    if op in ("<", "≤", "<="):
        return not (value <= target if op != "<" else value < target)
    if op in (">", "≥", ">="):
        return not (value >= target if op != ">" else value > target)
    if op == "=":
        return abs(value - target) > 1e-9 * max(1.0, abs(target))
    # No operator: "target 0.5" with a word only ("max", "limit", "min") says the direction.
    word = item[m.start() : m.end()].lower()
    if re.search(r"\b(?:max(?:imum)?|limit|tolerance|threshold)\b", word):
        return value > target
    if re.search(r"\bmin(?:imum)?\b", word):
        return value < target
    return False
