"""Reading a completion claim from the agent's report: one status table, one free-text table.

Both are heuristics about *words*; they decide only whether the agent claimed success,
never whether it succeeded (that is the verifier's). The ledger labels free-text claims
as such, and every run records the phrase that decided (``Decision.phrase``) and the
language it was read in (``Decision.language``).

**A report of several blocks** (markdown: headings, paragraphs, lists, tables, code, quotes) is
read by its structure first (:func:`read_report`, claimgrid.classify.conclusion): quoted material
is never read, the concluding statement decides, check marks and stated targets are read, a stop
that asks the user is no claim, an admission of placeholders or stubs is ``partial``; the words of
the chosen block are read by the rules below. A single paragraph is read by those rules alone.

Structured trace: ``status`` maps through :data:`STATUS_CLAIM` (one explicit table).
A status outside the table is not a claim, and the rule says so.

Free text (no structured trace): the words live in ``claim_words.toml``, one table per
language; the rows are read from it, never written as code.

**The language is decided first, and only that language's entries read the text.**
The detector is py3langid (a maintained fork of langid.py: a naive-Bayes model over byte
n-grams of ~140 languages, shipped inside the package, so nothing is downloaded at run time;
pure arithmetic, so the same text always gets the same answer). It was chosen over
lingua-language-detector (~100 MB installed, and no Maltese or Amharic: an EU language the
table must read and a language it must *recognise* as not covered), langdetect (random
unless seeded, unmaintained since 2021), pycld2 (CLD2, frozen since 2015; answers "unknown"
on short sentences) and cld3 (no tie information). Measured on the test reports
(tests/unit/classify/claim_cases.tsv) it names the right language first for 833 of 852;
what it misses are the neighbours no n-gram model separates in one sentence (Croatian and
Serbian, Czech and Slovak, Danish and Norwegian, Portuguese and Galician), which the rules
below handle. The detector reads the report's *prose*: code blocks, `code spans`, quoted
strings, paths, URLs, identifiers and numbers are taken out first (an English report
quoting a German label or a file named ``gotowe.txt`` is still English).

* **One language per text.** The detector ranks every language it knows for the prose of the
  whole text (trace block aside). A table language counts under its own code and the codes
  its ``also`` key names (one written standard the detector splits: Croatian tables read
  Bosnian and Serbian in Latin script). The languages within :data:`NEAR_TIE` of the first
  one's probability are the candidates, in the detector's order; the first table language
  among them whose entries decide a stance on the text reads it (a near tie between Czech
  and Slovak is broken by which table reads the report, never by a language outside the
  tie), else the first table language among them (no stance).
* **A language the table does not cover** - the detector's first language is none of the
  table's, and no table language is in a near tie with it (:data:`NEAR_TIE`) - gets ``UNKNOWN`` with the rule
  ``language not covered: xx`` (xx the detector's code): never another language's reading.
* **Very short texts** (fewer than :data:`SHORT_LETTERS` letters of prose: "DONE", "Fertig.",
  "Sorun çözüldü."), and texts on which the detector is unsure (its first language below
  :data:`UNSURE`), are below what any detector tells apart ("Valmis" is Finnish and
  Estonian, "Готово" Russian, Ukrainian and Bulgarian). Their candidates are every table
  language written in the text's script, in the detector's order, and the first one whose
  entries decide a stance reads the text (rule suffix ``short text``); none: no stance.
* **Mixed texts, per clause.** Every clause is read in the text's language, except a clause
  with no letter of the text's script (a Chinese sentence in an English report, "All tests
  pass." after a Chinese one): its language is decided for that clause alone, by the same
  rules; a clause whose language the table does
  not cover is skipped (it reads no stance).

Reading a text in its language: the text minus any trace block is cut into clauses
(sentences in every script, ``;``, new lines, and the language's "but" / "however" /
"although" words). Each clause gets a stance from the rows in :data:`ROWS` order, the first
row matching: "nothing needed changing" -> success (a completion claim: whether the task
allowed no change is the verifier's question); an unconfirmed result ("could not confirm",
"untested", a negator before one of the language's checking verbs) -> hedged, unless the
rest of the clause states a failure; a negated success word -> failure; a success word
weakened by a hedge (a modal or an uncertainty marker of the language, before or after it,
across commas but not sentences) -> hedged; a success word -> success; a failure word ->
failure. The report's stance is that of the **last** clause with one (a later "but the tests
fail" outweighs an earlier "fixed"; a later "I could not run the tests" weakens it to
hedged), except that an unconfirmed result after a failure leaves the failure; a success
followed by a clause with a retraction marker ("actually", "scratch that", ...) that is not
itself a success is ``retracted``. ``claimed`` is true only for the stance ``success``.

A review verdict stated in words (a label such as "Verdict" and a separator, then a pass or
fail word: "Verdict: FAIL") is the deliverable of a review, not the agent's own failure: the
clauses before it are the review's findings, and the report's stance is success ("review
verdict stated") unless a later clause hedges or retracts it. Verdict words are read in the
text's language too.
"""

from __future__ import annotations

import functools
import re
import tomllib
import unicodedata
from collections import Counter
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from claimgrid.classify import conclusion
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
# Letters for word boundaries: \w misses the vowel signs of Indic and Thai scripts, combining
# accents, Arabic harakat and Hebrew points (all inside words).
_LETTER = r"[\w\u0300-\u036f\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u0900-\u097f\u0980-\u09ff\u0e00-\u0e7f]"
# Characters a negator may not reach across: commas and sentence marks of every script ("no
# errors, all tests pass" is no negated claim). A hedge reaches across a comma ("I think,
# it is fixed"), never across a sentence mark.
_SPAN = r"[^.,;:!?\n。、，；：！？।،؛]"
_HEDGE_SPAN = r"[^.;:!?\n。；：！？।؛]"
# (row name, stance), tried in this order on each clause; "negated"/"hedged" rows pair a
# qualifier with a success word within the language's window.
ROWS: list[tuple[str, str]] = [
    ("partial admission", "partial"),
    ("asks the user", "asks"),
    ("nothing needed", "success"),
    ("unverified", "hedged"),
    ("negated success", "failure"),
    ("hedged success", "hedged"),
    ("announces", "none"),
    ("hypothetical", "none"),
    ("scoped success", "none"),
    ("success words", "success"),
    ("measured quantity", "none"),
    ("failure words", "failure"),
    ("deliverable written", "success"),
]
# A text with fewer letters of prose than this is "short": one or two words ("DONE",
# "Fertig.", "Sorun çözüldü.") carry too few n-grams for any detector (py3langid ranks "Done."
# Italian and "Listo." Esperanto), so the table's languages of its script are its candidates.
SHORT_LETTERS = 16
# Prose of fewer distinct words than this ("written written written written": a check list's
# one word, once per item) is short too: a detector ranks one repeated word as it ranks one word.
SHORT_WORDS = 3
# A detector whose first language has less probability than this cannot tell (a few words,
# mostly names: "Revisé Veredicto: FAIL" spreads over Luxembourgish, Guarani, French and
# Spanish at 4-6% each): such a text is read as a short one. A sentence the detector can
# read puts its first language at 20% or more (every report of the test data does).
UNSURE = 0.2
# Languages whose detector probability is at least this share of the first one's are tied
# with it: on one sentence Czech/Slovak, Danish/Norwegian, Dutch/Afrikaans, Portuguese/Galician,
# Turkish/Turkmen and Chinese/Wu come out between 4:5 and 1:1, while a report really written
# in Norwegian or Malay leaves Danish or Indonesian at 2:3 or less, and one in a language the
# detector is sure of (Swahili, Tagalog, Amharic, ...) leaves every other below 1%.
NEAR_TIE = 0.75
# The detector reads at most this much of a report's prose: a few paragraphs name the language
# as surely as the whole, and a long report (real agents write 10 kB and more) is read in time.
DETECT_CHARS = 1500
# Taken out of the prose before the detector reads it: a fenced block, a `code span`, a quoted
# string, a URL or path, a token with code punctuation or digits (``add()``, ``test_add``,
# ``app/auth.py``, ``3``). An apostrophe inside a word ("don't", "l'erreur") is no quote.
_NOT_PROSE = re.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*`"
    r"|(?<!\w)'[^'\n]{1,120}'(?!\w)|\"[^\"\n]{1,120}\"|“[^”\n]{1,120}”|‘[^’\n]{1,120}’|«[^»\n]{1,120}»|„[^“”\n]{1,120}[“”]"
    r"|\S*(?:://|[/\\_(){}\[\]<>=#@$%^*|~+]|\.\w)\S*|\S*\d\S*",
    re.S,
)
# Arabic harakat and tatweel, Hebrew points: written or left out at will, so matched without.
_POINTS = re.compile(r"[\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u0640\u064b-\u065f\u0670]")


@dataclass(frozen=True)
class Decision:
    """A claim as read: its stance, the rule that decided, the phrase that made it so (the
    clause, or the status, that decided; None when nothing did) and the language the free
    text was read in (the detector's code for a language the table does not cover; None for
    a trace status or a text without prose)."""

    stance: str
    rule: str
    phrase: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class Language:
    """One language's compiled rows (see claim_words.toml for what each list means)."""

    code: str
    name: str
    rows: dict[str, re.Pattern | None]
    retraction: re.Pattern | None
    breaks: re.Pattern | None
    verdict: re.Pattern | None
    scripts: frozenset[str] = frozenset()
    also: tuple[str, ...] = ()
    summary: re.Pattern | None = None


def _alt(fragments: list[str], boundaries: bool) -> str | None:
    if not fragments:
        return None
    body = "(?:" + "|".join(f"(?:{f})" for f in fragments) + ")"
    # A whole word is also not a member or a call (``Promise.resolve``, ``done(``): code in the
    # report, not a word of its prose (a real model's final text in the real-model ledger).
    return f"(?<!{_LETTER})(?<!\\.){body}(?!{_LETTER})(?!\\()" if boundaries else body


def _compile(pattern: str | None) -> re.Pattern | None:
    return re.compile(pattern, re.I) if pattern else None


@functools.lru_cache(maxsize=4096)
def script_of(ch: str) -> str | None:
    """The script of one letter by its Unicode name ("LATIN", "CYRILLIC", "CJK", "HANGUL", ...);
    None for a character that is no letter. Hiragana, katakana and han count as one script
    ("CJK"): Japanese writes all three."""
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    word = name.split(" ", 1)[0] if name else None
    return "CJK" if word in ("HIRAGANA", "KATAKANA", "CJK") else word


def _scripts(fragments: list[str]) -> frozenset[str]:
    # A language's scripts: those of the letters of its own words (its success and failure
    # entries), so a table is matched to a text by the table's own evidence.
    found: dict[str, int] = {}
    for ch in "".join(fragments):
        s = script_of(ch)
        if s:
            found[s] = found.get(s, 0) + 1
    return frozenset(s for s, n in found.items() if n * 10 >= sum(found.values()))


def _language(code: str, table: dict) -> Language:
    b, n = bool(table.get("boundaries", True)), int(table.get("window", 40))
    words = {key: _alt(list(table.get(key) or []), b) for key in (
        "success", "infinitives", "negators", "negators_after", "hedges", "directives", "unverified", "verify",
        "verify_after",
        "failure", "retractions",
        "nothing_needed", "clause_breaks", "verdict_labels", "verdict_pass", "verdict_fail",
        "partial", "asks_user", "scoped", "hypothetical", "announces", "measured", "delivered", "summary_headings",
        "ready", "work_stated_correct")}  # fmt: skip
    ok, span, reach = words["success"], f"{_SPAN}{{0,{n}}}?", f"{_HEDGE_SPAN}{{0,{n}}}?"
    negated = [f"{words['negators']}{span}{ok}" if words["negators"] else None,
               f"{ok}{span}{words['negators_after']}" if words["negators_after"] else None]  # fmt: skip
    # A modal takes the infinitive ("should work", "sollte funktionieren", "powinno działać"):
    # those forms are no claim alone, only the object of a hedge.
    weak = f"(?:{ok}|{words['infinitives']})" if words["infinitives"] else ok
    hedged = [f"{words['hedges']}{reach}{weak}", f"{ok}{reach}{words['hedges']}"] if words["hedges"] else []
    if words["directives"]:  # a task or condition put to the reader: only before the word it governs
        hedged.append(f"{words['directives']}{reach}{weak}")
    # An unconfirmed result: the language's own phrases, or a negator before (or, where the
    # language negates after the verb, after) one of its checking verbs: the structure, not
    # a list of sentences ("have not been able to confirm", "nisam mogao pokrenuti testove").
    unverified = [words["unverified"]]
    if words["verify"]:
        if words["negators"]:
            unverified.append(f"{words['negators']}{span}{words['verify']}")
        if words["negators_after"]:
            unverified.append(f"{words['verify']}{span}{words['negators_after']}")
        if words["verify_after"]:  # "протестировать его я не смог": the verb first, then "could not"
            unverified.append(f"{words['verify']}{span}{words['verify_after']}")
    rows = {
        "partial admission": _compile(words["partial"]),
        "asks the user": _compile(words["asks_user"]),
        "scoped success": _compile(words["scoped"]),
        "hypothetical": _compile(words["hypothetical"]),
        "announces": _compile(words["announces"]),
        "measured quantity": _compile(words["measured"]),
        "deliverable written": _compile(words["delivered"]),
        # Read beside ROWS, not in it: a hand-off is a claim only after the work is stated correct
        # (:func:`_hand_off`); the negators alone say a hand-off is not one ("not ready to submit").
        "ready to submit": _compile(words["ready"]),
        "work stated correct": _compile(words["work_stated_correct"]),
        "negators": _compile(words["negators"]),
        "nothing needed": _compile(words["nothing_needed"]),
        "unverified": _compile("|".join(p for p in unverified if p)),
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
    scripts = _scripts(list(table.get("success") or []) + list(table.get("failure") or []))
    return Language(code, str(table.get("name") or code), rows, _compile(words["retractions"]),
                    _compile(words["clause_breaks"]), verdict, scripts, tuple(table.get("also") or ()),
                    _compile(words["summary_headings"]))  # fmt: skip


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


def __getattr__(name: str) -> dict[str, Language]:
    # ``LANGUAGES`` stays a module attribute for its readers, built by ``languages()``.
    if name == "LANGUAGES":
        return languages()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------- which language a text is in


@functools.cache
def _identifier():
    # Loaded on the first free-text report (loading the language model is the reader's costliest step): trace-only runs never pay for it.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@functools.cache
def _by_detector_code() -> dict[str, str]:
    # detector code -> table code: each language's own code, then the codes its ``also`` names.
    out: dict[str, str] = {}
    for code in languages():
        out.setdefault(code, code)
    for code, lang in languages().items():
        for other in lang.also:
            out.setdefault(other, code)
    return out


def prose(text: str) -> str:
    """The words of ``text`` a detector should read: code, quotes, paths, identifiers and
    numbers taken out (:data:`_NOT_PROSE`), white space collapsed."""
    return " ".join(_NOT_PROSE.sub(" ", text or "").split())


# A han or hangul character is a syllable or a word: it weighs as much as a few Latin letters.
_SYLLABIC = {"CJK": 3, "HANGUL": 3}


def dominant_script(text: str) -> str | None:
    """The script most of ``text`` (its first :data:`DETECT_CHARS`) is written in, han and hangul
    characters weighing three letters each (None: no letters)."""
    counts: dict[str, int] = {}
    # Each distinct character once (in order of first appearance, so ties break as before):
    # a long report's script is plain from its first few kB.
    for ch, n in Counter(text[:DETECT_CHARS]).items():
        s = script_of(ch)
        if s:
            counts[s] = counts.get(s, 0) + n * _SYLLABIC.get(s, 1)
    return max(counts, key=lambda s: counts[s]) if counts else None


@dataclass(frozen=True)
class Detected:
    """What the detector made of a text: the table languages that may read it, in order
    (empty: none), the detector's first language, and how they were chosen."""

    candidates: tuple[str, ...]
    top: str | None
    how: str  # "detected", "near tie", "short text", "not covered", "no prose"


def detect(text: str) -> Detected:
    """The table languages that may read ``text`` (see the module docstring)."""
    # The language of a long report is plain from its first DETECT_CHARS of prose.
    words = prose(text[: 4 * DETECT_CHARS])[:DETECT_CHARS]
    # Only "none" and "fewer than SHORT_LETTERS" are asked of the count: it stops there.
    letters = sum(1 for _ in islice((ch for ch in words if ch.isalpha()), SHORT_LETTERS))
    if not letters:
        return Detected((), None, "no prose")
    ranking = _identifier().rank(words)
    script = dominant_script(words)
    # A neighbour named in ``also`` is read only in the table's own scripts (Serbian in Cyrillic is not
    # the Croatian table's).
    to_table = {k: v for k, v in _by_detector_code().items() if k == v or script in languages()[v].scripts}
    top, top_p = ranking[0]
    if letters < SHORT_LETTERS or top_p < UNSURE or len(set(words.lower().split())) < SHORT_WORDS:
        # By each table's own code: a neighbour named in ``also`` does not lift a table here.
        order = {code: k for k, (code, _) in enumerate(ranking)}
        langs = languages()
        found = sorted((c for c in langs if script in langs[c].scripts), key=lambda c: order.get(c, len(order)))
        return Detected(tuple(found), top, "short text")
    tied: list[str] = []
    for code, p in ranking:
        if p < NEAR_TIE * top_p:
            break
        if code in to_table and to_table[code] not in tied:
            tied.append(to_table[code])
    if not tied:
        return Detected((), top, "not covered")
    return Detected(tuple(tied), top, "detected" if to_table.get(top) == tied[0] and len(tied) == 1 else "near tie")


# ---------------------------------------------------------------- reading a clause in one language


def _fold(clause: str) -> str:
    if clause.isascii():  # nothing to compose and no vowel points: the common case, read as it is
        return clause
    return _POINTS.sub("", unicodedata.normalize("NFC", clause))


def clause_stance(clause: str, code: str = "en") -> tuple[str, str]:
    """(stance, row name with the language code) of one clause read in language ``code``;
    ("none", "no claim words") when no row of that language matches."""
    lang = languages()[code]
    text = _fold(clause)
    for row, stance in ROWS:
        pattern = lang.rows[row]
        m = pattern.search(text) if pattern is not None else None
        if m is None:
            continue
        if row == "unverified":
            # The unconfirmed result weakens what the clause states; a failure it states stays.
            rest, _ = clause_stance(text[: m.start()] + " " + text[m.end() :], code)
            if rest == "failure":
                return "failure", f"failure words [{code}]"
        return stance, f"{row} [{code}]"
    return "none", "no claim words"


def _retracts(clause: str, code: str) -> bool:
    lang = languages()[code]
    return lang.retraction is not None and lang.retraction.search(_fold(clause)) is not None


def _splitter(code: str) -> re.Pattern:
    return _splitters()[code]


@functools.cache
def _splitters() -> dict[str, re.Pattern]:
    base = [r"(?<=[.!?])\s+", r"[。！？；;।\n]+"]
    return {code: re.compile("|".join(base + ([lang.breaks.pattern] if lang.breaks else [])), re.I)
            for code, lang in languages().items()}  # fmt: skip


_TRACE = re.compile(r"^\s*[*_`]*trace[*_`]*\s*:\s*$", re.M)


def strip_trace(text: str) -> str:
    """The text before the last ``trace:`` block (the block is read by parse_trace, not here)."""
    found = list(_TRACE.finditer(text or ""))
    return (text or "")[: found[-1].start()] if found else (text or "")


def _verdict_in(text: str, code: str) -> tuple[str, str] | None:
    lang = languages()[code]
    if lang.verdict is None:
        return None
    found = None
    for m in lang.verdict.finditer(_fold(text)):
        found = ("FAIL" if m.group("fail") else "PASS", code)
    return found


def stated_verdict(text: str | None) -> tuple[str, str] | None:
    """("PASS" | "FAIL", language code) of the last review verdict stated in words in
    ``text`` (trace block aside), read in the text's language; None when it states none."""
    body = strip_trace(text or "")
    for code in detect(body).candidates:
        got = _verdict_in(body, code)
        if got:
            return got
    return None


def _phrase(clause: str) -> str:
    text = " ".join(clause.split())
    return text if len(text) <= 200 else text[:199] + "…"


def _clause_languages(clauses: list[str], code: str, text_script: str | None) -> list[str | None]:
    # A clause in the text's script is read in the text's language; one in another script is
    # decided on its own (None: a language the table does not cover, or no prose).
    out: list[str | None] = []
    own = languages()[code].scripts | ({text_script} if text_script else set())
    for clause in clauses:
        if "LATIN" in own and all(ch.isascii() for ch in clause if ch.isalpha()):
            out.append(code)  # a clause of ASCII letters is in a Latin-script text's own script
            continue
        words = prose(clause)
        script = dominant_script(words)
        if script is None or any(script_of(ch) in own for ch in words):
            out.append(code)
            continue
        found = detect(clause)
        langs = (
            [c for c in found.candidates if script in languages()[c].scripts]
            if found.how == "short text"
            else list(found.candidates)
        )
        out.append(next((c for c in langs if clause_stance(clause, c)[0] != "none"), langs[0] if langs else None))
    return out


def _hand_off(clause: str, before: str | None, code: str) -> str | None:
    """Where the work is stated correct when ``clause`` hands it off ("I'm ready to submit", the
    language's ``ready`` row, not negated): "same" (this clause states it, ``work_stated_correct``)
    or "before" (the clause just before it does): together a success claim. None: no hand-off, or
    one alone (a submission that says nothing of the work)."""
    rows = languages()[code].rows
    ready, stated, negators = rows.get("ready to submit"), rows.get("work stated correct"), rows.get("negators")
    if ready is None or stated is None:
        return None
    text = _fold(clause)
    m = ready.search(text)
    if m is None or (negators is not None and negators.search(text[: m.start()])):
        return None
    if stated.search(text):
        return "same"
    return "before" if before is not None and stated.search(_fold(before)) else None


def read_text(text: str | None, code: str, before: str | None = None) -> Decision:
    """The claim of a free-text report read in language ``code`` (see the module docstring);
    ``before``: the prose just before ``text`` in its report (the paragraph before a concluding
    one), which only a hand-off in ``text``'s first clause reads (:func:`_hand_off`)."""
    body = strip_trace(text or "")
    clauses = [c for c in _splitter(code).split(body) if c and c.strip()]
    codes = _clause_languages(clauses, code, "LATIN" if body.isascii() else dominant_script(prose(body)))
    verdicts = [k for k, (c, lc) in enumerate(zip(clauses, codes, strict=True)) if lc and _verdict_in(c, lc)]
    if verdicts:
        k = verdicts[-1]
        for later, lc in zip(clauses[k + 1 :], codes[k + 1 :], strict=True):
            if lc is None:
                continue
            stance, row = clause_stance(later, lc)
            if _retracts(later, lc) and stance != "success":
                return Decision("retracted", f"free text: review verdict, then retracted ({row})", _phrase(later), code)
            if stance == "hedged":
                return Decision("hedged", f"free text: review verdict, then {row}", _phrase(later), code)
        return Decision("success", f"free text: review verdict stated [{codes[k]}]", _phrase(clauses[k]), code)
    stances: list[tuple[str, str, bool, str]] = []
    # the previous clause and its language (the one before the text, where the caller gives it)
    before_clause: tuple[str, str | None] | None = None
    if before:
        said = [c for c in _splitter(code).split(strip_trace(before)) if c and c.strip()]
        before_clause = (said[-1], code) if said else None
    for clause, lc in zip(clauses, codes, strict=True):
        if lc is None:
            continue
        stance, row = clause_stance(clause, lc)
        prev, before_clause = before_clause, (clause, lc)
        said_before = prev[0] if prev and prev[1] == lc else None
        if stance == "none" and (hand := _hand_off(clause, said_before, lc)):
            stance, row = "success", f"hand-off after the work stated correct [{lc}]"
            if hand == "before" and said_before is not None:  # "before" comes only with a clause before
                clause = f"{said_before.strip()} {clause.strip()}"
        retracting = _retracts(clause, lc)
        if stance == "none" and retracting:
            stance, row = "failure", f"retraction marker [{lc}]"  # "wait, I was wrong" takes back what came before
        if stance == "hedged" and row.startswith("unverified") and stances and stances[-1][0] == "failure":
            continue  # "I could not fix it; I could not run the tests either": the failure stands
        if stance != "none":
            stances.append((stance, row, retracting, clause))
    if stances and stances[-1][0] == "asks":
        # A stop that asks the user for a decision or permission, with no success claim after it.
        return Decision("none", f"free text: stops to ask the user ({stances[-1][1]})", _phrase(stances[-1][3]), code)
    partial = next((s for s in stances if s[0] == "partial"), None)
    stances = [s for s in stances if s[0] not in ("asks", "partial")]
    if not stances:
        if partial:
            return Decision("partial", f"free text: {partial[1]}", _phrase(partial[3]), code)
        return Decision("none", "free text: no claim words", None, code)
    last, row, retracting, clause = stances[-1]
    if retracting and last != "success" and any(s == "success" for s, _, _, _ in stances[:-1]):
        return Decision("retracted", f"free text: success, then retracted ({row})", _phrase(clause), code)
    if partial and last in ("success", "hedged"):
        # "I have completed the task" beside "the results are placeholders": not a success claim.
        return Decision("partial", f"free text: {row}, with {partial[1]}", _phrase(partial[3]), code)
    return Decision(last, f"free text: {row}", _phrase(clause), code)


def read_report(text: str | None, code: str) -> Decision:
    """The claim of a free-text report read in language ``code`` by its structure
    (claimgrid.classify.conclusion): a single block is read by :func:`read_text`; a report of
    several blocks by its concluding statement, quoted material never read."""
    body = strip_trace(text or "")
    parts = conclusion.blocks(body)
    if not conclusion.is_structured(parts) or _verdict_in(body, code):
        # One block, or a review whose verdict is stated in words: the clause reading decides.
        return read_text(body, code)
    paragraphs = [b for b in parts if b.kind == "paragraph"]
    items = [b for b in parts if b.kind == "item"]
    # The paragraph right before the last one, with nothing between (a hand-off paragraph,
    # "I'm ready to submit.", reads the statement just before it: _hand_off).
    at = max((k for k, b in enumerate(parts) if b.kind == "paragraph"), default=0)
    lead = parts[at - 1].text if at > 0 and parts[at - 1].kind == "paragraph" else None
    decision = _concluding(paragraphs, items, code, lead)
    # An admission anywhere in the prose that results are placeholders, stubs or partial: the
    # language's partial row over every paragraph and item (one search, not a reading per block).
    partial = languages()[code].rows["partial admission"]
    if decision.stance in ("success", "hedged", "none") and partial is not None:
        for b in paragraphs + items:
            m = partial.search(_fold(conclusion.unquoted(b.text)))
            if m:
                clause = next(
                    c for c in _splitter(code).split(conclusion.unquoted(b.text)) if c and partial.search(_fold(c))
                )
                rule = f"free text: report, partial admission [{code}] (beside {decision.stance})"
                decision = Decision("partial", rule, _phrase(clause), code)
                break
    missed = conclusion.missed_targets(parts)
    if missed:
        decision = Decision(
            decision.stance, f"{decision.rule}; ✓ beside a missed target: {_phrase(missed[0])!r}", decision.phrase, code
        )
    return Decision(decision.stance, decision.rule, conclusion.restore(decision.phrase, body), code)


def _concluding(paragraphs: list, items: list, code: str, lead: str | None = None) -> Decision:
    # The concluding statement decides: the last paragraph, a summary heading's section, the first.
    lang = languages()[code]
    tried: list[tuple[str, list]] = []
    if paragraphs:
        tried.append(("last paragraph", [paragraphs[-1]]))
    if lang.summary is not None:
        # The last section under a summary heading (a report has one; the last one concludes).
        last = max((b.part for b in paragraphs + items if b.section and lang.summary.search(b.section)), default=None)
        summary = [b for b in paragraphs + items if last is not None and b.part == last]
        tried.append(("summary section", summary))
    if paragraphs:
        tried.append(("first paragraph", [paragraphs[0]]))
    for where, chosen in tried:
        if not chosen:
            continue
        before = conclusion.unquoted(lead) if lead and where == "last paragraph" else None
        d = read_text(conclusion.unquoted("\n".join(b.text for b in chosen)), code, before)
        if d.stance == "none" and "stops to ask the user" in d.rule:
            return Decision("none", f"free text: report, {where} {d.rule.removeprefix('free text: ')}", d.phrase, code)
        if d.stance != "none":
            return Decision(
                d.stance, f"free text: report, {where} -> {d.rule.removeprefix('free text: ')}", d.phrase, code
            )
    marked = conclusion.marked_list(items)
    if marked is not None:
        stance, rule, item = marked
        return Decision(stance, f"free text: report, {rule}", _phrase(item), code)
    read = [(b, read_text(conclusion.unquoted(b.text), code)) for b in paragraphs + items]
    said = [(b, d) for b, d in read if d.stance not in ("none", "partial")]
    kinds = {d.stance for _, d in said}
    if not said:
        return Decision("none", "free text: report, no claim words outside quoted material", None, code)
    if len(kinds) == 1:
        b, d = said[-1]
        return Decision(
            d.stance,
            f"free text: report, every block with a stance -> {d.rule.removeprefix('free text: ')}",
            d.phrase,
            code,
        )
    return Decision(
        "UNKNOWN",
        f"free text: report, mixed stances ({', '.join(sorted(kinds))}), no concluding statement",
        said[-1][1].phrase,
        code,
    )


def text_decision(text: str | None) -> Decision:
    """The claim of a free-text report: its language decided first, then read in it (see the
    module docstring)."""
    body = strip_trace(text or "")
    found = detect(body)
    if found.how == "no prose":
        # No words outside code and paths: only the report's check marks can speak ("- [x] `out.json`").
        marked = conclusion.marked_list(conclusion.blocks(body))
        if marked is not None:
            stance, rule, item = marked
            return Decision(stance, f"free text: report, {rule}", _phrase(item))
        return Decision("none", "free text: no claim words")
    if not found.candidates:
        # Check marks are no words: a check-marked list reads the same in any language.
        marked = conclusion.marked_list(conclusion.blocks(body))
        if marked is not None and marked[0] == "success" and conclusion.is_structured(conclusion.blocks(body)):
            return Decision(
                "success",
                f"free text: report, {marked[1]} (language not covered: {found.top})",
                _phrase(marked[2]),
                found.top,
            )
        return Decision("UNKNOWN", f"language not covered: {found.top}", None, found.top)
    first = None
    for code in found.candidates:
        d = read_report(body, code)
        first = first or d
        if d.stance != "none":
            if found.how == "short text":
                d = Decision(d.stance, f"{d.rule} (short text)", d.phrase, d.language)
            return d
    assert first is not None
    if found.how == "short text":
        return Decision("none", "free text: no claim words (short text)", None, found.candidates[0])
    return first


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
