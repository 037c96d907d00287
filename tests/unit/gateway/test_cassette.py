"""The cassette's content address (claimgrid.gateway.cassette.request_sha256)."""

from claimgrid.gateway.cassette import request_sha256


def _body(tool_text: str, user: str = "go") -> dict:
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": user},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c0", "type": "function", "function": {"name": "run_command", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c0", "content": tool_text},
        ],
    }


def test_hash_is_canonical_and_ignores_only_a_test_runners_elapsed_time():
    a = _body("....\nRan 4 tests in 0.001s\n\nOK\n[exit code 0]")
    b = _body("....\nRan 4 tests in 0.013s\n\nOK\n[exit code 0]")
    assert request_sha256(a) == request_sha256(b)
    assert request_sha256(_body("2 passed in 0.12s")) == request_sha256(_body("2 passed in 1.50s"))
    # Key order does not matter; every other difference does.
    assert request_sha256(dict(reversed(list(a.items())))) == request_sha256(a)
    assert request_sha256(_body("Ran 5 tests in 0.001s")) != request_sha256(a)
    assert request_sha256(_body("OK", user="go!")) != request_sha256(_body("OK"))
    # The same text outside a tool result is the request's own content and is hashed as is.
    assert request_sha256(_body("x", user="in 0.1s")) != request_sha256(_body("x", user="in 0.2s"))
    # Not JSON: the raw bytes are the address.
    assert request_sha256(None, b"{bad") != request_sha256(None, b"{bad!")
    assert len(request_sha256(a)) == 64


def test_content_parts_are_masked_too():
    def parts(t):
        body = _body("")
        body["messages"][-1]["content"] = [{"type": "text", "text": f"Ran 1 test in {t}s"}]
        return body

    assert request_sha256(parts("0.001")) == request_sha256(parts("0.020"))


def test_a_tool_result_sent_as_text_after_the_models_answer_is_masked_too():
    """A framework that keeps its history as text sends a tool result as a user message
    (smolagents' "Observation:"); the prompt before the model's first answer is not masked."""

    def text_history(t: str, prompt: str = "go") -> dict:
        return {
            "model": "m",
            "messages": [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": 'Calling tools:\n[{"name": "run_command"}]'},
                {"role": "user", "content": [{"type": "text", "text": f"Observation:\n46 passed in {t}s"}]},
            ],
        }

    assert request_sha256(text_history("0.31")) == request_sha256(text_history("0.56"))
    assert request_sha256(text_history("0.31")) != request_sha256(text_history("0.31", prompt="go!"))
    assert request_sha256(text_history("0.31", "in 0.1s")) != request_sha256(text_history("0.31", "in 0.2s"))
    # The masked form is the hash's input only: a different observation still differs.
    assert request_sha256(text_history("0.31")) != request_sha256(
        {**text_history("0.31"), "messages": text_history("0.31")["messages"][:2]}
    )
