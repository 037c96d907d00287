"""Reading a completion claim from the agent's report: one status table, one free-text table.

Both are heuristics about *words*; they decide only whether the agent claimed success,
never whether it succeeded (that is the verifier's). The ledger labels free-text claims
as such, and every run records the phrase that decided (``Decision.phrase``).

Structured trace: ``status`` maps through :data:`STATUS_CLAIM` (one explicit table).
A status outside the table is not a claim, and the rule says so.

Free text (no structured trace): the words live in ``claim_words.toml``, one table per
language (at least the ten most used languages of software teams); the rows are read from
it, never written as code. The text minus any trace block is cut into clauses (sentences,
``;``, new lines, and each language's "but" / "however" / "although" words). Each clause
gets a stance from the rows in :data:`ROWS` order, the first row matching in any language:
"nothing needed changing" -> success (a completion claim: whether the task allowed no
change is the verifier's question); "I could not confirm it" -> hedged; a negated success
word -> failure; a hedged success word -> hedged; a success word -> success; a failure word
-> failure. The report's stance is that of the **last** clause with one (a later "but the
tests fail" outweighs an earlier "fixed"), and a success followed by a clause with a
retraction marker ("actually", "scratch that", ...) that is not itself a success is
``retracted``. ``claimed`` is true only for the stance ``success``.

A review verdict stated in words (a label such as "Verdict" and a separator, then a pass or
fail word: "Verdict: FAIL") is the deliverable of a review, not the agent's own failure: the
clauses before it are the review's findings, and the report's stance is success ("review
verdict stated") unless a later clause hedges or retracts it.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from claimgrid.store.events import AgentReport

# status (upper-cased) -> stance. The only place a status word becomes a claim.
STATUS_CLAIM: dict[str, str] = {
    "DONE": "success",
    "PASS": "success",
    "PASSED": "success",
    "COMPLETE": "success",
    "COMPLETED": "success",
    "FINISHED": "success",
    "FIXED": "success",
    "RESOLVED": "success",
    "SUCCESS": "success",
    "SUCCEEDED": "success",
    "SUCCESSFUL": "success",
    "OK": "success",
    "APPROVED": "success",
    "MERGED": "success",
    "BLOCKED": "failure",
    "FAILED": "failure",
    "FAIL": "failure",
    "FAILURE": "failure",
    "ERROR": "failure",
    "INCOMPLETE": "failure",
    "PARTIAL": "failure",
    "ABANDONED": "failure",
    "NOT_DONE": "failure",
    "CANNOT_COMPLETE": "failure",
    "NEEDS_REVIEW": "hedged",
    "IN_PROGRESS": "hedged",
    "UNKNOWN": "hedged",
    "PENDING": "hedged",
}

_WORDS_FILE = Path(__file__).with_name("claim_words.toml")
# Letters for word boundaries: \w misses Devanagari vowel signs and combining accents.
_LETTER = r"[\w\u0300-\u036f\u0900-\u097f]"
# Characters a negator may not reach across: commas and sentence marks of every script ("no
# errors, all tests pass" is no negated claim). A hedge reaches across a comma ("I think,
# it is fixed"), never across a sentence mark.
_SPAN = r"[^.,;:!?\n。、，；：！？।]"
_HEDGE_SPAN = r"[^.;:!?\n。；：！？।]"
# (row name, stance), tried in this order on each clause; "negated"/"hedged" rows pair a
# qualifier with a success word within the language's window.
ROWS: list[tuple[str, str]] = [
    ("nothing needed", "success"),
    ("unverified", "hedged"),
    ("negated success", "failure"),
    ("hedged success", "hedged"),
    ("success words", "success"),
    ("failure words", "failure"),
]


@dataclass(frozen=True)
class Decision:
    """A claim as read: its stance, the rule that decided, and the phrase that made it so
    (the clause, or the status, that decided; None when nothing did)."""

    stance: str
    rule: str
    phrase: str | None = None


@dataclass(frozen=True)
class Language:
    """One language's compiled rows (see claim_words.toml for what each list means)."""

    code: str
    name: str
    rows: dict[str, re.Pattern | None]
    retraction: re.Pattern | None
    breaks: re.Pattern | None
    verdict: re.Pattern | None


def _alt(fragments: list[str], boundaries: bool) -> str | None:
    if not fragments:
        return None
    body = "(?:" + "|".join(f"(?:{f})" for f in fragments) + ")"
    return f"(?<!{_LETTER}){body}(?!{_LETTER})" if boundaries else body


def _compile(pattern: str | None) -> re.Pattern | None:
    return re.compile(pattern, re.I) if pattern else None


def _language(code: str, table: dict) -> Language:
    b, n = bool(table.get("boundaries", True)), int(table.get("window", 40))
    words = {key: _alt(list(table.get(key) or []), b) for key in (
        "success", "negators", "negators_after", "hedges", "unverified", "failure", "retractions", "nothing_needed",
        "clause_breaks", "verdict_labels", "verdict_pass", "verdict_fail")}  # fmt: skip
    ok, span, reach = words["success"], f"{_SPAN}{{0,{n}}}?", f"{_HEDGE_SPAN}{{0,{n}}}?"
    negated = [f"{words['negators']}{span}{ok}" if words["negators"] else None,
               f"{ok}{span}{words['negators_after']}" if words["negators_after"] else None]  # fmt: skip
    hedged = [f"{words['hedges']}{reach}{ok}", f"{ok}{reach}{words['hedges']}"] if words["hedges"] else []
    rows = {
        "nothing needed": _compile(words["nothing_needed"]),
        "unverified": _compile(words["unverified"]),
        "negated success": _compile("|".join(p for p in negated if p)),
        "hedged success": _compile("|".join(hedged)),
        "success words": _compile(ok),
        "failure words": _compile(words["failure"]),
    }
    verdict = None
    if words["verdict_labels"] and (words["verdict_pass"] or words["verdict_fail"]):
        verdict = _compile(
            words["verdict_labels"]
            + r"[*_`\s]*[:：=\-–—][*_`\s\"'“”「」]*"
            + f"(?:(?P<fail>{words['verdict_fail'] or '(?!)'})|(?P<pass>{words['verdict_pass'] or '(?!)'}))"
        )
    return Language(code, str(table.get("name") or code), rows, _compile(words["retractions"]),
                    _compile(words["clause_breaks"]), verdict)  # fmt: skip


def load_languages(path: Path = _WORDS_FILE) -> dict[str, Language]:
    """Every language of the free-text table, by code, in file order."""
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    return {code: _language(code, table) for code, table in data.items()}


@functools.cache
def languages() -> dict[str, Language]:
    """:func:`load_languages` of the shipped table, compiled on first use: a process that
    never reads a claim (``grid.py list``, a refused flag) does not pay for ~1,000 patterns."""
    return load_languages()


@functools.cache
def _clause_split() -> re.Pattern:
    breaks = [lang.breaks.pattern for lang in languages().values() if lang.breaks]
    return re.compile("|".join([r"(?<=[.!?])\s+", r"[。！？；;।\n]+", *breaks]), re.I)


def __getattr__(name: str) -> dict[str, Language]:
    # ``LANGUAGES`` stays a module attribute for its readers, built by ``languages()``.
    if name == "LANGUAGES":
        return languages()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_TRACE = re.compile(r"^\s*[*_`]*trace[*_`]*\s*:\s*$", re.M)


def strip_trace(text: str) -> str:
    """The text before the last ``trace:`` block (the block is read by parse_trace, not here)."""
    found = list(_TRACE.finditer(text or ""))
    return (text or "")[: found[-1].start()] if found else (text or "")


def clause_stance(clause: str) -> tuple[str, str]:
    """(stance, row name with the language code) of one clause; ("none", "no claim words")
    when no row matches in any language."""
    for row, stance in ROWS:
        for lang in languages().values():
            pattern = lang.rows[row]
            if pattern is not None and pattern.search(clause):
                return stance, f"{row} [{lang.code}]"
    return "none", "no claim words"


def _retracts(clause: str) -> bool:
    return any(lang.retraction is not None and lang.retraction.search(clause) for lang in languages().values())


def stated_verdict(text: str | None) -> tuple[str, str] | None:
    """("PASS" | "FAIL", language code) of the last review verdict stated in words in
    ``text`` (trace block aside); None when it states none."""
    found = None
    body = strip_trace(text or "")
    for lang in languages().values():
        if lang.verdict is None:
            continue
        for m in lang.verdict.finditer(body):
            if found is None or m.start() >= found[0]:
                found = (m.start(), "FAIL" if m.group("fail") else "PASS", lang.code)
    return (found[1], found[2]) if found else None


def _phrase(clause: str) -> str:
    text = " ".join(clause.split())
    return text if len(text) <= 200 else text[:199] + "…"


def text_decision(text: str | None) -> Decision:
    """The claim of a free-text report (see the module docstring)."""
    clauses = [c for c in _clause_split().split(strip_trace(text or "")) if c and c.strip()]
    verdicts = [k for k, c in enumerate(clauses) if stated_verdict(c)]
    if verdicts:
        k = verdicts[-1]
        code = stated_verdict(clauses[k])[1]  # type: ignore[index]
        for later in clauses[k + 1 :]:
            stance, row = clause_stance(later)
            if _retracts(later) and stance != "success":
                return Decision("retracted", f"free text: review verdict, then retracted ({row})", _phrase(later))
            if stance == "hedged":
                return Decision("hedged", f"free text: review verdict, then {row}", _phrase(later))
        return Decision("success", f"free text: review verdict stated [{code}]", _phrase(clauses[k]))
    stances = []
    for clause in clauses:
        stance, row = clause_stance(clause)
        retracting = _retracts(clause)
        if stance == "none" and retracting:
            stance, row = "failure", "retraction marker"  # "wait, I was wrong" takes back what came before
        if stance != "none":
            stances.append((stance, row, retracting, clause))
    if not stances:
        return Decision("none", "free text: no claim words")
    last, row, retracting, clause = stances[-1]
    if retracting and last != "success" and any(s == "success" for s, _, _, _ in stances[:-1]):
        return Decision("retracted", f"free text: success, then retracted ({row})", _phrase(clause))
    return Decision(last, f"free text: {row}", _phrase(clause))


def text_stance(text: str | None) -> tuple[str, str]:
    """(stance, rule) of a free-text report; see the module docstring."""
    d = text_decision(text)
    return d.stance, d.rule


def status_stance(status: str | None) -> tuple[str, str]:
    """(stance, rule) of a structured ``status`` through STATUS_CLAIM."""
    key = (status or "").strip().upper().replace(" ", "_").replace("-", "_")
    if key in STATUS_CLAIM:
        return STATUS_CLAIM[key], f"status {key} -> {STATUS_CLAIM[key]}"
    return "none", f"status {key or '(empty)'} is not in the status table"


def report_decision(report: AgentReport | dict | None) -> Decision:
    """The claim of one agent report (as recorded or parsed; None: no report): the trace's
    status if there is a trace, else the free text."""
    report = as_report(report)
    if report.trace:
        stance, rule = status_stance(report.trace.status)
        return Decision(stance, rule, f"status: {report.trace.status}" if report.trace.status is not None else None)
    return text_decision(report.text)


def report_stance(report: AgentReport | dict | None) -> tuple[str, str]:
    """(stance, rule) of :func:`report_decision`."""
    d = report_decision(report)
    return d.stance, d.rule


def as_report(report: AgentReport | dict | None) -> AgentReport:
    """An agent report as its model; an empty one for None (no report: no text, no trace)."""
    if isinstance(report, AgentReport):
        return report
    return AgentReport.read(report if report is not None else {})
