"""The grid's cells: framework x task x content x swap x model x repeat, with stable ids."""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from claimgrid.execute.spec import Selection


@dataclass(frozen=True)
class Cell:
    framework: str
    task: str
    content: str
    swap: str
    model: str
    substitute: str
    repeat: int

    @property
    def run_id(self) -> str:
        """Readable and stable: resuming a grid finds the same ids."""
        return ".".join(
            [
                self.framework,
                self.task,
                self.content,
                self.swap,
                slug(self.model),
                f"sub-{slug(self.substitute)}",
                f"r{self.repeat}",
            ]
        )

    def as_dict(self) -> dict:
        return asdict(self)


def slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", model).strip("-")


def allowed(model: str, content, swap) -> bool:
    """False when the model's registry entry limits it to other conditions (``runs_in``, a
    predicate over the condition objects: the fault models run in the untreated cell only).
    ``content`` and ``swap`` are condition objects (claimgrid.inputs.conditions); a model that is
    not a reference model runs under every condition."""
    from claimgrid.reference.registry import get

    entry = get(model)
    return entry is None or entry.runs_with(content, swap)


def plan(
    selection: Selection, content_conditions: dict | None = None, swap_conditions: dict | None = None
) -> list[Cell]:
    """Every allowed cell of ``selection``, ordered so that early results already span
    frameworks and conditions.

    ``content_conditions`` / ``swap_conditions`` map the selection's condition names to their
    objects (default: the shipped ``conditions/``), which decide which models each is crossed
    with (``allowed``)."""
    if content_conditions is None or swap_conditions is None:
        from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions

        content_conditions = content_conditions if content_conditions is not None else load_content_conditions()
        swap_conditions = swap_conditions if swap_conditions is not None else load_swap_conditions()

    from claimgrid.errors import ClaimgridError
    from claimgrid.reference.registry import get

    sel = selection

    def ok(m, c, s):
        entry = get(m)
        if entry is None or entry.runs_in is None:
            return True
        if c not in content_conditions or s not in swap_conditions:
            raise ClaimgridError(
                f"model '{m}' runs only under some conditions, and "
                f"'{c if c not in content_conditions else s}' is not a known condition"
            )
        return entry.runs_with(content_conditions[c], swap_conditions[s])

    return [
        Cell(fw, t, c, s, m, sel.substitute, r)
        for r, m, t, s, c, fw in itertools.product(
            range(sel.repeats), sel.models, sel.tasks, sel.swap, sel.content, sel.frameworks
        )
        if ok(m, c, s)
    ]
