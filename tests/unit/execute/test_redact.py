"""claimgrid.execute.redact: the run token out of every string and key of a run's evidence."""

from __future__ import annotations

import pytest

from claimgrid.execute.redact import REDACTED, redact

TOKEN = "cg-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def test_every_occurrence_in_strings_keys_bytes_and_nesting_is_replaced_and_counted():
    value = {
        "events": [{"kind": "exchange", "messages": [{"content": f"the key is {TOKEN}, again {TOKEN}"}]}],
        TOKEN: (1, None, True, f"x{TOKEN}y"),
        "diff": b"+" + TOKEN.encode() + b"\n",
        "n": 3.5,
    }
    out, n = redact(value, TOKEN)
    assert n == 5
    assert TOKEN not in repr(out) and TOKEN.encode() not in out["diff"]
    assert out["events"][0]["messages"][0]["content"] == f"the key is {REDACTED}, again {REDACTED}"
    assert out[REDACTED] == (1, None, True, f"x{REDACTED}y") and out["n"] == 3.5
    assert TOKEN in value["events"][0]["messages"][0]["content"]  # the input is not changed


def test_nothing_to_redact_gives_the_same_object():
    value = {"a": ["b", {"c": "d"}], "e": "cg-another-run"}
    out, n = redact(value, TOKEN)
    assert n == 0 and out is value


def test_an_empty_token_is_a_harness_bug():
    with pytest.raises(ValueError):
        redact("anything", "")
