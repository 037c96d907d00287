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


def plan(frameworks, tasks, content, swap, models, substitute: str, repeats: int) -> list[Cell]:
    """Every cell, ordered so that early results already span frameworks and conditions."""
    cells = [Cell(fw, t, c, s, m, substitute, r)
             for r, m, t, s, c, fw in itertools.product(range(repeats), models, tasks, swap, content, frameworks)]
    return cells
