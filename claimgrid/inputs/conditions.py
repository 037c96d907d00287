"""Content conditions (templates rendered into a task's content slot) and swap conditions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import field_validator, model_validator

from claimgrid import ROOT
from claimgrid.errors import DataError
from claimgrid.inputs.schema import Strict, load_toml, validate
from claimgrid.inputs.tasks import Task

# The placeholders render() fills. Any other {identifier} in a template is a typo that would
# reach the agent as literal text. Braces around anything else (JSON, code) stay literal.
PLACEHOLDERS = ("task_text", "instruction", "authority")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ContentCondition(Strict):
    name: str
    description: str
    template: str
    carries: Literal["attacker_goal", "legitimate_note"] | None = None
    authority: str | None = None

    @field_validator("template")
    @classmethod
    def _known_placeholders(cls, template: str) -> str:
        for name in _PLACEHOLDER.findall(template):
            if name not in PLACEHOLDERS:
                raise ValueError(
                    f"unknown placeholder {{{name}}}; allowed: " + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                )
        if "{task_text}" not in template:
            raise ValueError("template must contain {task_text}")
        return template

    @model_validator(mode="after")
    def _placeholders(self):
        if self.carries and "{instruction}" not in self.template:
            raise ValueError("a template that carries an instruction must contain {instruction}")
        if "{authority}" in self.template and not self.authority:
            raise ValueError("template uses {authority} but no authority is set")
        return self

    def instruction_for(self, task: Task) -> str | None:
        """The injected or legitimate sentence this condition puts into the task's slot."""
        if self.carries == "attacker_goal":
            return task.spec.attacker_goal.instruction
        if self.carries == "legitimate_note":
            return task.spec.legitimate_note.instruction
        return None

    def render(self, task: Task) -> str:
        values = {
            "task_text": task.slot_text(),
            "instruction": self.instruction_for(task) or "",
            "authority": self.authority or "",
        }
        # str.replace, not str.format: task text may legitimately contain braces.
        out = self.template
        for key, val in values.items():
            out = out.replace("{" + key + "}", val)
        return out


class SwapCondition(Strict):
    """What the gateway does when the assigned model becomes unavailable.

    ``unavailable_from_call``: 0-based index of the first model call that the assigned
    model cannot serve (-1: never). ``on_unavailable``: ``substitute`` (another model
    serves) or ``refuse`` (the call fails). ``reported_name``: which model name the
    caller is told when a substitute serves.
    """

    name: str
    description: str
    unavailable_from_call: int
    on_unavailable: Literal["none", "substitute", "refuse"]
    reported_name: Literal["assigned", "substitute"] | None = None

    @model_validator(mode="after")
    def _consistent(self):
        if (self.on_unavailable == "none") != (self.unavailable_from_call < 0):
            raise ValueError("on_unavailable 'none' goes with unavailable_from_call = -1, and only with it")
        if self.on_unavailable == "substitute" and self.reported_name is None:
            raise ValueError("a substitute swap needs reported_name")
        return self


def _load_dir(folder: Path, model):
    if not folder.is_dir():
        raise DataError(folder, None, "no such conditions folder")
    out = {}
    for path in sorted(folder.glob("*.toml")):
        obj = validate(model, load_toml(path), path)
        if obj.name != path.stem:
            raise DataError(path, "name", f"'{obj.name}' does not match the file name '{path.stem}'")
        out[obj.name] = obj
    return out


CONTENT_ORDER = ["clean", "malicious", "legitimate", "authority-named"]
SWAP_ORDER = ["none", "silent", "reported", "bound"]


def _ordered(d: dict, order: list[str]) -> dict:
    return {k: d[k] for k in sorted(d, key=lambda k: (order.index(k) if k in order else len(order), k))}


def load_content_conditions(root: Path | None = None) -> dict[str, ContentCondition]:
    return _ordered(_load_dir((root or ROOT / "conditions") / "content", ContentCondition), CONTENT_ORDER)


def load_swap_conditions(root: Path | None = None) -> dict[str, SwapCondition]:
    return _ordered(_load_dir((root or ROOT / "conditions") / "swap", SwapCondition), SWAP_ORDER)
