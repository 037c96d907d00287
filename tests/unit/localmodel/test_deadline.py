"""A local model's per-call deadline follows from its measured speed (claimgrid.caps)."""

from __future__ import annotations

import math

from claimgrid.caps import LOCAL_MODEL_DEADLINE_SAFETY
from claimgrid.localmodel import call_deadline
from claimgrid.localmodel.catalog import LocalModel

ENTRY = LocalModel.model_validate(
    {
        "weights": {"path": "x"},
        "template": "gguf",
        "context": 2048,
        "threads": 1,
        "seed": 1,
        "temperature": 0.1,
        "max_output_tokens": 48,
    }
)


def test_deadline_is_worst_call_at_measured_speed_times_factors():
    d = call_deadline({"prompt_tokens_per_s": 100.0, "generation_tokens_per_s": 10.0}, ENTRY, jobs=2)
    assert d["seconds"] == math.ceil(LOCAL_MODEL_DEADLINE_SAFETY * 2 * (2000 / 100 + 48 / 10))
    assert d["prompt_budget_tokens"] == 2000 and "2000 prompt tokens / 100 tok/s" in d["rule"]


def test_slower_model_or_more_runs_in_flight_get_longer_deadlines():
    fast = call_deadline({"prompt_tokens_per_s": 400, "generation_tokens_per_s": 40}, ENTRY, 1)["seconds"]
    slow = call_deadline({"prompt_tokens_per_s": 40, "generation_tokens_per_s": 4}, ENTRY, 1)["seconds"]
    assert slow > 5 * fast
    # Every run in flight can be waiting at the one server: none is left out (a cap at 4 ended
    # calls that were only waiting their turn behind 11 others).
    many = call_deadline({"prompt_tokens_per_s": 400, "generation_tokens_per_s": 40}, ENTRY, 12)
    assert many["queue_factor"] == 12
    assert many["seconds"] == math.ceil(LOCAL_MODEL_DEADLINE_SAFETY * 12 * (2000 / 400 + 48 / 40))
