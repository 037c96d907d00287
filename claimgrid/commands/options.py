"""The flags several commands share: the data folders, ``--policies``, the sealing ``--key``
and ``--claim-judge``."""

from __future__ import annotations

import argparse
from pathlib import Path

from claimgrid import ROOT


def data_opts(sp) -> None:
    """``--tasks-dir``, ``--conditions-dir`` and ``--venvs``, each defaulting to the checkout's own."""
    sp.add_argument("--tasks-dir", type=Path, default=ROOT / "tasks", help="an existing folder of task folders")
    sp.add_argument(
        "--conditions-dir",
        type=Path,
        default=ROOT / "conditions",
        help="an existing folder with content/ and swap/",
    )
    sp.add_argument("--venvs", type=Path, default=ROOT / "venvs.toml", help="an existing file of framework entries")


def policies_opt(sp) -> None:
    """``--policies FILE.py`` (repeatable): extra reference models registered before the command runs."""
    sp.add_argument(
        "--policies",
        type=Path,
        action="append",
        default=[],
        metavar="FILE.py",
        help="an existing Python file registering extra reference models (policy + true behaviour) "
        "with @claimgrid.reference.reference_model; may be repeated",
    )


def key_opt(sp) -> None:
    """``--key FILE``: the publisher's sealing key."""
    sp.add_argument(
        "--key",
        type=Path,
        default=None,
        metavar="FILE",
        help="the publisher's ed25519 private key that seals the ledger, made on first use, never inside a "
        "ledger (default: $CLAIMGRID_KEY, else ~/.config/claimgrid/ed25519.pem)",
    )


def allow_unsealed_opt(sp) -> None:
    """``--allow-unsealed``: read a ledger without a seal (its lines then checked against its plan)."""
    sp.add_argument(
        "--allow-unsealed",
        action="store_true",
        help="read a ledger whose meta.json has no seal (refused otherwise); its lines are still checked "
        "against meta.json's plan, finished and grid_size",
    )


def _judge_model(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise argparse.ArgumentTypeError(f"{value!r}: a reference model name or a LiteLLM model string")
    return value


def claim_judge_opt(sp) -> None:
    """``--claim-judge MODEL``: a second reader of each final report (claimgrid.classify.judge)."""
    sp.add_argument(
        "--claim-judge",
        type=_judge_model,
        default=None,
        metavar="MODEL",
        help="also ask MODEL (a reference model such as last-line-judge, or any LiteLLM model string: a hosted "
        "model is called only when named here) to read each final report with the fixed, versioned judge prompt; "
        "its reading is recorded as source judge beside the classification, which it never changes",
    )
