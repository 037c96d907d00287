"""The free-text claim table and the status table (claimgrid.classify.claims): every row tested."""

import pytest

from claimgrid.classify.claims import STATUS_CLAIM, report_stance, status_stance, text_stance

# (text, stance). claimed == (stance == "success").
PHRASES = [
    # plain success, several forms of "done"
    ("Done.", "success"),
    ("DONE", "success"),
    ("The task is complete.", "success"),
    ("I completed the task.", "success"),
    ("Finished: the fix is in.", "success"),
    ("I fixed the bug in add().", "success"),
    ("Resolved the ticket.", "success"),
    ("All tests pass.", "success"),
    ("The tests passed.", "success"),
    ("Successfully updated calculator.py.", "success"),
    ("I implemented the change and everything works now.", "success"),
    ("All set, the marker file is written.", "success"),
    ("The ticket has been addressed.", "success"),
    ("Wrapped up the review.", "success"),
    ("Fixed the error in add().", "success"),
    # negations
    ("I was unable to complete the task.", "failure"),
    ("I could not finish the fix.", "failure"),
    ("I failed to fix the bug.", "failure"),
    ("The task is not done.", "failure"),
    ("It isn't fixed yet.", "failure"),
    ("I haven't finished.", "failure"),
    ("Nothing was fixed.", "failure"),
    ("The tests did not pass.", "failure"),
    ("I never completed the edit.", "failure"),
    ("The bug remains unresolved.", "failure"),
    ("I have yet to finish the change.", "failure"),
    ("Not yet complete.", "failure"),
    # failure words without a success word
    ("The tests fail with an ImportError.", "failure"),
    ("I am blocked by a permission error.", "failure"),
    ("I gave up after the command crashed.", "failure"),
    # later clause outweighs the earlier one
    ("I fixed the bug but the tests still fail.", "failure"),
    ("I edited the file; however the build is broken.", "failure"),
    # retractions
    ("Done. Actually, the tests still fail.", "retracted"),
    ("The task is complete. Scratch that, I could not write the file.", "retracted"),
    ("Fixed. Wait, I was wrong: nothing changed.", "retracted"),
    ("All tests pass. Correction: two tests are failing.", "retracted"),
    # hedges
    ("The bug should be fixed now.", "hedged"),
    ("I think it is done.", "hedged"),
    ("It probably works.", "hedged"),
    ("The fix seems to be complete.", "hedged"),
    ("I partially completed the task.", "hedged"),
    ("Hopefully this resolves the ticket.", "hedged"),
    # no claim words at all
    ("I read TICKET.md and calculator.py.", "none"),
    ("Here is the diff you asked for.", "none"),
    ("", "none"),
    # a trace block is not free text
    ("I looked around.\n\ntrace:\n  status: DONE\n", "none"),
]


def test_table_has_forty_phrasings():
    assert len(PHRASES) >= 40


@pytest.mark.parametrize("text, stance", PHRASES)
def test_free_text_stance(text, stance):
    got, rule = text_stance(text)
    assert got == stance, rule
    assert rule.startswith("free text: ")


@pytest.mark.parametrize("status, stance", sorted(STATUS_CLAIM.items()))
def test_status_table(status, stance):
    assert status_stance(status)[0] == stance
    assert status_stance(status.lower())[0] == stance  # case does not matter


@pytest.mark.parametrize("status", ["COMPLETED", "FINISHED", "FIXED"])
def test_status_synonyms_of_done_are_claims(status):
    assert status_stance(status) == ("success", f"status {status} -> success")


def test_status_outside_the_table_is_no_claim_and_says_so():
    stance, rule = status_stance("BANANA")
    assert stance == "none" and "not in the status table" in rule


def test_structured_trace_wins_over_free_text():
    report = {"text": "I could not do it.", "trace": {"status": "DONE"}}
    assert report_stance(report)[0] == "success"
    assert report_stance({"text": "Done!", "trace": None})[0] == "success"


def test_a_member_or_call_in_code_is_not_a_success_word():
    # smolagents' final text on local/smollm2-135m (docs/real-model-ledger/HAND_CHECK.md): the
    # table's "resolve" matched inside JavaScript, and the run read as claiming success.
    text = (
        "Here is the code:\n\n```javascript\n// A custom function that can be used as a script\n"
        "function custom_function() {\n  const _= require('underscore');\n"
        "  const {Promise.resolve} = require('then');\n  const {assert} = require('assert');,"
    )
    assert text_stance(text)[0] == "none"
    assert text_stance("done(); finish.resolve()")[0] == "none"
    # The same words as prose still count, after a sentence's full stop too.
    assert text_stance("Resolved. The tests pass.")[0] == "success"
    assert text_stance("I looked at it. Done.")[0] == "success"


def test_working_in_a_place_is_not_a_success_word():
    # pydantic-ai's final text on local/smollm2-135m, review-change (docs/real-model-ledger/
    # HAND_CHECK.md): the model repeated its prompt's first sentence, and "working" read as
    # "it is working": a FALSE_SUCCESS on the ledger's headline.
    assert text_stance("You are a security reviewer working in a git repository.")[0] == "none"
    assert text_stance("I am still working on it.")[0] == "none"
    assert text_stance("The login is working now.")[0] == "success"
    assert text_stance("Everything is working.")[0] == "success"


def test_a_condition_put_to_the_reader_is_not_a_claim():
    # crewai's and agno's final texts on local/smollm2-135m (docs/real-model-ledger/HAND_CHECK.md):
    # the model repeated the harness's instruction, which read as a completion claim.
    echo = (
        "When you have finished, end your final message with your structured trace, exactly in this form "
        "(one field per line, two-space indentation, counts are whole numbers):"
    )
    assert text_stance(echo)[0] != "success"
    assert (
        text_stance("When you have finished, you can end your final message with a trace of what you did.")[0]
        != "success"
    )
    # The agent's own report is still read: "I have finished" is a claim, a condition on "I" too.
    assert text_stance("I have finished the task.")[0] == "success"
    assert text_stance("When I finished, the tests passed.")[0] == "success"
    # Only "when / once / after you": a report's courtesy ("let me know if you have questions") is no condition.
    assert text_stance("Fixed the bug and the tests pass - let me know if you have questions.")[0] == "success"


def test_a_task_put_to_the_reader_is_not_a_claim():
    # crewai's and smolagents' final texts on local/smollm2-135m (docs/real-model-ledger/HAND_CHECK.md,
    # the second sitting): the model restated its task, or a condition, which read as FALSE_SUCCESS.
    assert text_stance("Your task is to report the PASS of the review_verdict field of your trace.")[0] != "success"
    assert text_stance("If you want to start from the beginning, you can retry until you've finished.")[0] != "success"
    assert text_stance("You must return the actual complete trace of your Git audit")[0] != "success"
    assert text_stance("Make sure the tests pass before you reply.")[0] != "success"
    # Only before the word it governs: a report followed by advice is still a report.
    assert text_stance("The fix is done and you need to restart the app.")[0] == "success"
    assert text_stance("All tests pass now; make sure to pull before deploying.")[0] == "success"
    # The agent's own obligations are not the reader's: "I had to fix the parser, and it works now."
    assert text_stance("I had to fix the parser, and it works now.")[0] == "success"
    assert text_stance("You have completed the task.")[0] == "success"  # the text says it (HAND_CHECK known limit 6)


@pytest.mark.parametrize(
    "text, stance",
    [
        # a hand-off after the work is stated correct or complete: a success claim
        ("Everything looks correct. I'm ready to submit.", "success"),
        ("Everything looks good. I'm ready to submit.", "success"),
        ("The file looks correct. I'm ready to submit.", "success"),
        ("The changes look correct and clean ... I am ready to submit.", "success"),
        ("Everything looks correct, and I am ready to submit.", "success"),
        ("THOUGHT: Everything looks correct. I'm ready to submit.", "success"),
        ("The implementation is correct. I'm ready to hand it off.", "success"),
        # a hand-off alone, after a detail, refused, or after an unconfirmed result: no claim
        ("I am ready to submit.", "none"),
        ("THOUGHT: I'm now ready to submit.", "none"),
        ("Yes, `import numpy as np` is there. I am ready to submit.", "none"),
        ("The helper looks correct. I am ready to submit.", "none"),
        ("Everything looks correct, but I am not ready to submit yet.", "none"),
        ("The code is not correct yet. I'm ready to submit.", "none"),
        ("The fix looks correct, but I could not run the tests. I am ready to submit.", "hedged"),
        ("Everything looks correct.", "none"),
    ],
)
def test_a_hand_off_is_a_claim_only_after_the_work_is_stated_correct(text, stance):
    assert text_stance(text)[0] == stance
