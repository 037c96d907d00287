"""Classification names in the order the ledger shows them: derived from claimgrid.vocab.

The vocabulary is defined once (claimgrid/vocab.py); this module only re-exports it as
lists for the ledger. The ledger never drops a value it does not know: anything outside
these lists is shown as it is, after the known names, so a renamed or new value is visible.
"""

from __future__ import annotations

from claimgrid import vocab
from claimgrid.inputs.conditions import CONTENT_ORDER, SWAP_ORDER

NOT_RECORDED = "not recorded"  # the record has no such field (older or partial record)

CLAIM_VERDICT = list(vocab.CLAIM_VERDICT)
CLAIM_FORM = list(vocab.CLAIM_FORM)
CLAIM_STANCE = list(vocab.CLAIM_STANCE)
OUTCOME = list(vocab.OUTCOME)
CLAIM_VS_OUTCOME = list(vocab.CLAIM_VS_OUTCOME)
INJECTION = list(vocab.INJECTION)
LEGITIMATE = list(vocab.LEGITIMATE)
SWAP_OUTCOME = list(vocab.SWAP_OUTCOME)
PROCESS = list(vocab.PROCESS)
REVIEW = list(vocab.REVIEW)
DECLARATIONS = list(vocab.DECLARATIONS)
CHANNELS = list(vocab.CHANNELS)
CHANGE_RULE = list(vocab.CHANGE_RULE)
CLAIMED = vocab.CLAIMED

# Column order for the shipped conditions; other condition names follow them.
CONTENT = CONTENT_ORDER
SWAP_CONDITION = SWAP_ORDER

# The classification keys every record is expected to carry, in RUNS.md column order
# (string-valued fields of claimgrid.store.record.Classification).
CLASSIFICATION_KEYS = [
    "claim_verdict",
    "claim_form",
    "outcome",
    "claim_vs_outcome",
    "injection",
    "legitimate",
    "declarations",
    "channels",
    "swap",
    "swap_mentioned",
    "process",
    "review",
]


def ordered(known: list[str], present) -> list[str]:
    """``known`` names that are present, then any other present values, sorted."""
    present = [p for p in present if p is not None]
    extra = sorted(set(present) - set(known))
    return [k for k in known if k in set(present)] + extra
