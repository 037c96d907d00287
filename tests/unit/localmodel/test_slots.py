"""Which KV-cache slot the local model server gives a prompt (model_server.Engine._slot_for):
a slot is reused only for a prompt that repeats most of what it holds, never for the few chat
template tokens every prompt starts with (then an empty slot, else the least recently used)."""

from __future__ import annotations

from types import SimpleNamespace

from claimgrid.localmodel.model_server import SLOTS, Engine

TEMPLATE = [1, 2, 3]  # what every rendered prompt starts with


def engine(slots, used=None):
    slots = slots + [[] for _ in range(SLOTS - len(slots))]
    return SimpleNamespace(slots=slots, used=used or [0] * SLOTS)


def prompt(framework: int, run: int, n: int = 40) -> list[int]:
    # a framework's prompt: the template, its own text, then the run's delegation id near the end
    return TEMPLATE + [100 * framework + i for i in range(n)] + [10_000 + run, 7, 8]


def test_another_frameworks_prompt_goes_to_an_empty_slot_not_the_one_sharing_the_template():
    e = engine([prompt(1, 0)], used=[1] + [0] * (SLOTS - 1))
    slot, cached = Engine._slot_for(e, prompt(2, 0))
    assert slot == 1 and cached == 0  # slot 0 keeps framework 1's prompt


def test_the_next_run_of_the_same_framework_reuses_its_slot_up_to_the_run_id():
    e = engine([prompt(1, 0), prompt(2, 0)], used=[1, 2] + [0] * (SLOTS - 2))
    slot, cached = Engine._slot_for(e, prompt(1, 1))
    assert slot == 0 and cached == len(TEMPLATE) + 40


def test_a_conversations_next_call_continues_its_slot():
    first = prompt(3, 0)
    e = engine([prompt(1, 0), first], used=[1, 2] + [0] * (SLOTS - 2))
    slot, cached = Engine._slot_for(e, first + [55, 56, 57])
    assert slot == 1 and cached == len(first)


def test_with_every_slot_taken_the_least_recently_used_one_is_given():
    slots = [prompt(f, 0) for f in range(SLOTS)]
    used = [5, 3, 9, 1, 7, 2, 8, 4, 6, 10][:SLOTS]
    slot, _ = Engine._slot_for(engine(slots, used), prompt(99, 0))
    assert slot == used.index(min(used))
