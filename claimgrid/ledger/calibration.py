"""The reference models' true behaviour per run, for the calibration section: one accessor.

Contract: :func:`truth_source` ``(meta) -> (truth_fn, scope)``. ``truth_fn(row) -> dict``
maps classification field -> true value for one run (empty when the model states no
truth). ``scope`` says which runs the truth covers, in one sentence.

Where the reference-model registry provides full truth tables (``claimgrid.reference.registry``
``truth_of(TruthCell)``: every field, following the model that served each call), they
are used for every run. Otherwise the ledger falls back to the documented claim verdict
(``reference_truth.expected_claim_verdict``), valid only where the assigned model served
every call. A field with no truth is reported as such, never invented.
"""

from __future__ import annotations

from functools import lru_cache

from claimgrid.errors import ClaimgridError

UNTREATED = ("control (no swap)", "not reached", "no-op (substitute = assigned)")


def _registry_truth(meta: dict):
    try:
        from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
        from claimgrid.reference.registry import TruthCell, load_policies, truth_of
        for path in meta.get("policies") or ():  # the grid's own reference models (--policies)
            load_policies(path)
        from claimgrid.inputs.tasks import load_tasks
        tasks, content, swaps = load_tasks(), load_content_conditions(), load_swap_conditions()
    except (ImportError, ClaimgridError, OSError):
        return None
    budget = meta.get("max_model_calls") if isinstance(meta.get("max_model_calls"), int) else 24

    @lru_cache(maxsize=None)
    def cell(task, cont, swap, model, substitute) -> tuple:
        if task not in tasks or cont not in content or swap not in swaps:
            return ()
        try:
            t = truth_of(TruthCell(tasks[task], content[cont], swaps[swap], model, substitute, budget))
        except Exception:  # noqa: BLE001 - a truth function that fails gives no truth, never a guess
            return ()
        return tuple(sorted((t or {}).items()))

    def fn(row: dict) -> dict:
        return dict(cell(row["task"], row["content"], row["swap_condition"], row["model"], row["substitute"]))
    return fn


def truth_source(meta: dict):
    fn = _registry_truth(meta)
    if fn is not None:
        return fn, "every run (the registry's truth follows the model that served each call)"
    from claimgrid.reference.truth import expected_claim_verdict

    def fallback(row: dict) -> dict:
        if row.get("treatment") not in UNTREATED:
            return {}
        v = expected_claim_verdict(row["model"], row["role"])
        return {} if v is None else {"claim_verdict": v}
    return fallback, ("runs where the assigned model served every call (swap `none`, or a swap not reached or "
                      "a no-op): only the documented claim verdict is known")
