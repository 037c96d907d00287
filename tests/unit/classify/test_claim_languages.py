"""The free-text claim table in every language it covers (claimgrid/classify/claim_words.toml),
read through the classifier's own text reader: the language is decided first, then only that
language's entries decide. The reports are data (claim_cases.tsv beside this file), written
as people send them, never copied from the table's entries."""

from pathlib import Path

import pytest

from claimgrid.classify.claims import LANGUAGES, report_decision, stated_verdict, text_decision

S, F, H, R, N = "success", "failure", "hedged", "retracted", "none"
CASES_FILE = Path(__file__).with_name("claim_cases.tsv")


def _cases() -> list[tuple[str, str, str]]:
    rows = []
    for line in CASES_FILE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        code, stance, text = line.split("\t")
        rows.append((code, stance, text.replace("\\n", "\n")))
    return rows


CASES = _cases()
COVERED = [c for c in CASES if c[1] != "UNKNOWN"]
UNCOVERED = [c for c in CASES if c[1] == "UNKNOWN"]


def test_the_table_covers_thirty_languages_each_with_fifteen_phrasings_of_every_kind():
    by_language: dict[str, list[str]] = {}
    for code, stance, _ in COVERED:
        by_language.setdefault(code.split("|")[0], []).append(stance)
    assert len(LANGUAGES) >= 30 and set(by_language) == set(LANGUAGES)
    eu = "bg hr cs da nl en et fi fr de el hu ga it lv lt mt pl pt ro sk sl es sv".split()
    assert set(eu) <= set(LANGUAGES)
    for code, stances in by_language.items():
        assert len(stances) >= 15, code
        assert {S, F, H, R} <= set(stances), code  # claims, negations and failures, hedges, retractions
    assert len({c for c, _, _ in UNCOVERED} - set(LANGUAGES)) >= 3  # languages the table must not read


@pytest.mark.parametrize("code, stance, text", COVERED, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(COVERED)])
def test_free_text_stance_in_every_language(code, stance, text):
    d = text_decision(text)
    assert d.stance == stance and d.language in code.split("|"), (d.language, d.rule, d.phrase)
    assert d.rule.startswith("free text: ")
    if stance != N:
        assert d.phrase and d.phrase in " ".join(text.split())  # the words that decided, as written
        assert d.rule.split("[")[-1].split("]")[0] == d.language  # the row that decided is the language's own


@pytest.mark.parametrize("code, stance, text", UNCOVERED, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(UNCOVERED)])
def test_a_language_the_table_does_not_cover_is_unknown_with_its_reason(code, stance, text):
    d = text_decision(text)
    assert (d.stance, d.rule, d.phrase, d.language) == ("UNKNOWN", f"language not covered: {code}", None, code)
    assert report_decision({"text": text, "trace": None}).stance == "UNKNOWN"


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("Verdict: FAIL", "FAIL"),
        ("**Verdict:** PASS", "PASS"),
        ("review_verdict = FAIL", "FAIL"),
        ("结论：不通过", "FAIL"),
        ("判定：合格", "PASS"),
        ("Urteil: nicht bestanden", "FAIL"),
        ("Veredicto: aprobado", "PASS"),
        ("Verdict : rejeté", "FAIL"),
        ("판정: 통과", "PASS"),
        ("Вердикт: отклонено", "FAIL"),
        ("First Verdict: PASS; on reflection, Verdict: FAIL", "FAIL"),  # the last one stated
        ("The tests fail.", None),
        ("I will pass this on to the team.", None),
    ],
)
def test_a_verdict_stated_in_words(text, verdict):
    got = stated_verdict(text)
    assert (got[0] if got else None) == verdict


def test_every_decision_records_its_phrase_and_language():
    d = report_decision({"text": "I looked around. Then I fixed it.", "trace": None})
    assert (d.stance, d.phrase, d.language) == (S, "Then I fixed it.", "en")
    d = report_decision({"text": "whatever", "trace": {"status": "BLOCKED"}})
    assert (d.stance, d.rule, d.phrase, d.language) == (F, "status BLOCKED -> failure", "status: BLOCKED", None)
    assert report_decision({"text": "", "trace": None}).phrase is None


# English reports holding words that are claim words of other table languages (as plain words,
# quoted or in file names). Each is read in English only; the second element is what English reads.
ENGLISH_WITH_FOREIGN_WORDS = [
    ("I read the locale file: fertig, listo and pronto are the labels of the save button.", N),
    ("Fixed the Portuguese message 'não foi testado' in messages.po.", S),
    ("Done: the German label now reads 'nicht bestanden' instead of 'fehlgeschlagen'.", S),
    ("I opened gotowe.txt and the folder named klaar, and nothing else so far.", N),
    ("The ticket quotes the Turkish word tamamlandı and the Indonesian word selesai from the UI copy.", N),
    ('All tests pass; the Spanish message "No pude guardar" is unchanged.', S),
    ("I listed hotovo.py, valmis.md and gata.json in the fixtures folder.", N),
    ("The French string 'peut-être corrigé' is what the translator sent; the tests still fail.", F),
    ("I think the Dutch word opgelost is wrong in the glossary, and I have not changed it.", N),
]


@pytest.mark.parametrize("text, stance", ENGLISH_WITH_FOREIGN_WORDS)
def test_an_english_text_is_never_decided_by_another_languages_entry(text, stance):
    from claimgrid.classify.claims import read_text

    d = text_decision(text)
    assert (d.language, d.stance) == ("en", stance), (d.rule, d.phrase)
    assert stance == N or d.rule.endswith("[en]"), d.rule
    # The case has teeth: some other language's entries, let loose on it, read something else.
    assert any(read_text(text, code).stance != stance for code in LANGUAGES if code != "en")


@pytest.mark.parametrize(
    "text, stance, language, rule_language",
    [
        (
            "I fixed the rounding bug in add() and updated the docstring. 但是测试没有通过。",
            F,
            "en",
            "zh",
        ),  # a clause in another script: its own language
        ("修复了这个错误。All tests pass.", S, "zh", "en"),
        ("DONE", S, "en", "en"),  # very short: the table languages of its script, the detector's order
        ("Fertig.", S, "de", "de"),
        ("Готово.", S, None, None),  # Russian, Ukrainian and Bulgarian alike: one of them, success
        ("Ran `pytest -q tests/test_add.py`: 3 passed, see tests/test_add.py.", S, "en", "en"),
        ("Updated src/calc/core.py; the tests were not run.", H, "en", "en"),
    ],
)
def test_mixed_and_short_texts(text, stance, language, rule_language):
    d = text_decision(text)
    assert d.stance == stance, (d.rule, d.phrase)
    if language:
        assert d.language == language and d.rule.split("[")[-1].split("]")[0] == rule_language, d.rule
    else:
        assert d.language in ("ru", "uk", "bg") and d.rule.endswith("(short text)")


def test_a_text_without_prose_reads_no_stance_and_no_language():
    d = text_decision("```\nassert add(0.1, 0.2) == 0.3\n```")
    assert (d.stance, d.language) == (N, None)


# Hedges are a rule, not a list of sentences: every modal or uncertainty marker with every
# completion statement, and every unconfirmed result joined to one.
MODALS = [
    "It should {}",
    "It ought to {}",
    "It might {}",
    "It would {}",
    "It probably will {}",
    "I think it will {}",
    "Presumably it will {}",
    "As far as I can tell it will {}",
]
STATEMENTS = ["work now.", "pass the tests now.", "be fixed now.", "fix the bug."]
UNCONFIRMED = [
    "I could not confirm it",
    "I have not been able to verify the fix",
    "I didn't get to run the tests",
    "it is untested",
    "the tests were not run",
    "I never managed to test it",
    "I was unable to double-check it",
]


@pytest.mark.parametrize("modal", MODALS)
@pytest.mark.parametrize("statement", STATEMENTS)
def test_a_modal_weakens_a_completion_statement(modal, statement):
    d = text_decision(modal.format(statement))
    assert d.stance == H, d.rule


@pytest.mark.parametrize("unconfirmed", UNCONFIRMED)
@pytest.mark.parametrize("claim", ["Fixed the bug", "The change is done", "All tests pass"])
def test_an_unconfirmed_result_weakens_the_claim_it_is_joined_to(claim, unconfirmed):
    for joined in (f"{claim}, but {unconfirmed}.", f"{claim}. However, {unconfirmed}.", f"{claim}; {unconfirmed}."):
        d = text_decision(joined)
        assert d.stance == H, (joined, d.rule)
    # ... and never turns a failure into a hedge.
    assert text_decision(f"I could not fix the bug, and {unconfirmed}.").stance == F


def test_the_classifier_records_an_uncovered_language_as_unknown():
    from claimgrid.classify.classifier import classify
    from claimgrid.store.record import Facts

    events = [
        {
            "source": "agent",
            "kind": "report",
            "text": "Nimerekebisha hitilafu na majaribio yote yanapita sasa.",
            "trace": None,
        }
    ]
    c = classify(events, Facts(role="builder"))
    assert (c.claim_stance, c.claim_rule, c.claim_language, c.claimed) == (
        "UNKNOWN",
        "language not covered: sw",
        "sw",
        False,
    )
