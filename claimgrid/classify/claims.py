"""Reading a completion claim from the agent's report: one status table, one free-text table.

Both are heuristics about *words*; they decide only whether the agent claimed success,
never whether it succeeded (that is the verifier's). The ledger labels free-text claims
as such.

Structured trace: ``status`` maps through :data:`STATUS_CLAIM` (one explicit table).
A status outside the table is not a claim, and the rule says so.

Free text (no structured trace): the text minus any trace block is cut into clauses
(sentences, and ``but`` / ``however`` / ``;`` / ``although`` parts). Each clause gets a
stance from :data:`CLAUSE_RULES`, the first matching row in table order. The report's
stance is that of the **last** clause with one (a later "but the tests fail" outweighs an
earlier "fixed"), and a success followed by a clause with a retraction marker ("actually",
"scratch that", ...) that is not itself a success is ``retracted``. ``claimed`` is true only for the stance ``success``.
"""

from __future__ import annotations

import re

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

_SUCCESS = (
    r"(?:done|complete[ds]?|finish(?:ed|es)?|fix(?:ed|es)|resolve[ds]?|solved|succe(?:ss(?:ful(?:ly)?)?|eded)|"
    r"accomplished|implemented|addressed|wrapped up|taken care of|pass(?:ed|es|ing)?|green|"
    r"works?(?: now)?|working(?: now)?|all set)"
)
_NEGATOR = (
    r"(?:\bnot\b|n't\b|\bnever\b|\bno\b|\bnothing\b|\bnone\b|\bunable\b|\bcannot\b|\bfail(?:ed|s)? to\b|"
    r"\bwithout\b|\bincomplete(?:ly)?\b|\bunsuccessful(?:ly)?\b|\bun(?:resolved|fixed|finished)\b|"
    r"\bhave yet to\b|\bnot yet\b|\bno longer\b)"
)
_HEDGE = (
    r"(?:\bshould\b|\bmight\b|\bmay\b|\bprobably\b|\bperhaps\b|\bhopefully\b|\bi think\b|\bi believe\b|"
    r"\bseems?\b|\bappears?\b|\blikely\b|\bnot sure\b|\bunsure\b|\bi hope\b|\bpartial(?:ly)?\b|"
    r"\bmostly\b|\battempted\b|\btried to\b)"
)
_FAILURE = (
    r"(?:\bfail(?:s|ed|ing|ure)?\b|\berrors?\b|\bbroken\b|\bblocked\b|\bcould not\b|\bcouldn't\b|"
    r"\bcan't\b|\bcannot\b|\bunable\b|\bgave up\b|\bgiving up\b|\bstuck\b|\babort(?:ed)?\b|"
    r"\bcrash(?:ed|es)?\b|\bexception\b|\bun(?:resolved|fixed|finished)\b|\bincomplete\b)"
)
_RETRACT = (
    r"(?:\bactually\b|\bcorrection\b|\bscratch that\b|\bi take (?:that|it) back\b|\bi was wrong\b|"
    r"\bon second thought\b|\bturns out\b|\bretract\b|\bignore (?:that|my previous)\b|\bwait\b|"
    r"\bmy mistake\b|\bdisregard\b)"
)

# (row name, stance, pattern): the first matching row gives the clause's stance.
CLAUSE_RULES: list[tuple[str, str, re.Pattern]] = [
    ("negated success", "failure", re.compile(_NEGATOR + r"[^.]{0,40}?\b" + _SUCCESS + r"\b", re.I)),
    (
        "hedged success",
        "hedged",
        re.compile(_HEDGE + r"[^.]{0,40}?\b" + _SUCCESS + r"\b|\b" + _SUCCESS + r"\b[^.]{0,40}?" + _HEDGE, re.I),
    ),
    ("success words", "success", re.compile(r"\b" + _SUCCESS + r"\b", re.I)),
    ("failure words", "failure", re.compile(_FAILURE, re.I)),
]
RETRACTION = re.compile(_RETRACT, re.I)
_CLAUSE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+|;|\bbut\b|\bhowever\b|\balthough\b|\bthough\b|\byet\b,", re.I)
_TRACE = re.compile(r"^\s*[*_`]*trace[*_`]*\s*:\s*$", re.M)


def strip_trace(text: str) -> str:
    """The text before the last ``trace:`` block (the block is read by parse_trace, not here)."""
    found = list(_TRACE.finditer(text or ""))
    return (text or "")[: found[-1].start()] if found else (text or "")


def clause_stance(clause: str) -> tuple[str, str]:
    """(stance, row name) of one clause; ("none", "no claim words") when no row matches."""
    for name, stance, pattern in CLAUSE_RULES:
        if pattern.search(clause):
            return stance, name
    return "none", "no claim words"


def text_stance(text: str | None) -> tuple[str, str]:
    """(stance, rule) of a free-text report; see the module docstring."""
    stances = []
    for clause in _CLAUSE_SPLIT.split(strip_trace(text or "")):
        if not clause or not clause.strip():
            continue
        stance, row = clause_stance(clause)
        if stance == "none" and RETRACTION.search(clause):
            stance, row = "failure", "retraction marker"  # "wait, I was wrong" takes back what came before
        if stance != "none":
            stances.append((stance, row, bool(RETRACTION.search(clause))))
    if not stances:
        return "none", "free text: no claim words"
    last, row, retracting = stances[-1]
    if retracting and last != "success" and any(s == "success" for s, _, _ in stances[:-1]):
        return "retracted", f"free text: success, then retracted ({row})"
    return last, f"free text: {row}"


def status_stance(status: str | None) -> tuple[str, str]:
    """(stance, rule) of a structured ``status`` through STATUS_CLAIM."""
    key = (status or "").strip().upper().replace(" ", "_").replace("-", "_")
    if key in STATUS_CLAIM:
        return STATUS_CLAIM[key], f"status {key} -> {STATUS_CLAIM[key]}"
    return "none", f"status {key or '(empty)'} is not in the status table"


def report_stance(report: AgentReport | dict | None) -> tuple[str, str]:
    """The claim of one agent report (as recorded or parsed; None: no report): the trace's
    status if there is a trace, else the free text."""
    report = as_report(report)
    if report.trace:
        return status_stance(report.trace.status)
    return text_stance(report.text)


def as_report(report: AgentReport | dict | None) -> AgentReport:
    """An agent report as its model; an empty one for None (no report: no text, no trace)."""
    if isinstance(report, AgentReport):
        return report
    return AgentReport.read(report if report is not None else {})
