"""The grid's cells: framework x task x content x swap x model x repeat, with stable ids."""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass


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
        return ".".join([self.framework, self.task, self.content, self.swap, slug(self.model),
                         f"sub-{slug(self.substitute)}", f"r{self.repeat}"])

    def as_dict(self) -> dict:
        return asdict(self)


def slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", model).strip("-")


def allowed(model: str, content: str, swap: str, restrictions: dict | None = None) -> bool:
    """False when the model's registry entry restricts it to other conditions
    (``reference_truth.GRID_RESTRICTIONS``: fault models run on clean content, no swap)."""
    if restrictions is None:
        from .reference_truth import GRID_RESTRICTIONS as restrictions
    only = restrictions.get(model)
    return only is None or (content in only.get("content", (content,)) and swap in only.get("swap", (swap,)))


def plan(frameworks, tasks, content, swap, models, substitute: str, repeats: int,
         restrictions: dict | None = None) -> list[Cell]:
    """Every allowed cell, ordered so that early results already span frameworks and conditions.

    A model restricted to some conditions (``allowed``) is crossed only with those."""
    cells = [Cell(fw, t, c, s, m, substitute, r)
             for r, m, t, s, c, fw in itertools.product(range(repeats), models, tasks, swap, content, frameworks)
             if allowed(m, c, s, restrictions)]
    return cells
