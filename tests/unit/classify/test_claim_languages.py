"""The free-text claim table in every language it covers (claimgrid/classify/claim_words.toml),
read through the classifier's own text reader: the language is decided first, then only that
language's entries decide. The reports are data (claim_cases.tsv beside this file), written
as people send them, never copied from the table's entries."""

from pathlib import Path

import pytest

from claimgrid.classify.claims import LANGUAGES, detect, report_decision, stated_verdict, text_decision

S, F, H, R, N = "success", "failure", "hedged", "retracted", "none"
CASES_FILE = Path(__file__).with_name("claim_cases.tsv")


def _cases() -> list[tuple[str, str, str]]:
    rows = []
    for n, line in enumerate(CASES_FILE.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        code, stance, text = line.split("\t")
        rows.append((code, stance, text))
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
