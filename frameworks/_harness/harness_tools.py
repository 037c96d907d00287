"""The harness tool layer, as adapters import it (a facade; stdlib only).

The layer lives in four modules, each with one concern:

* ``tools_channel``   - ``ToolChannel``: ``source: tools`` events as JSON lines on a pipe;
* ``workspace_jail``  - ``Jail``: agent paths resolved component by component from a
  workspace descriptor with ``O_NOFOLLOW``; no path leaves the workspace;
* ``command_sandbox`` - ``CommandSandbox``: ``run_command`` in the bubblewrap sandbox the
  driver described in ``ctl["command_sandbox"]`` (or unguarded, as ``nobody`` when root);
* ``tool_specs``      - the six tools (specs, implementations, ``ToolOutcome``),
  ``make_tools`` and ``call_tool``.

Contract: docs/CONTRACTS.md, "Tool layer" and source ``tools``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from command_sandbox import CommandResult, CommandSandbox  # noqa: E402
from tool_specs import (  # noqa: E402
    CATEGORIES,
    RESULT_EVENT_CHARS,
    SPECS,
    HarnessTool,
    ToolContext,
    ToolOutcome,
    call_tool,
    check_args,
    make_tools,
)
from tools_channel import ToolChannel  # noqa: E402
from workspace_jail import Jail, ToolRefused, diff_snapshots  # noqa: E402

__all__ = [
    "CATEGORIES",
    "RESULT_EVENT_CHARS",
    "SPECS",
    "CommandResult",
    "CommandSandbox",
    "HarnessTool",
    "Jail",
    "ToolChannel",
    "ToolContext",
    "ToolOutcome",
    "ToolRefused",
    "call_tool",
    "diff_snapshots",
    "check_args",
    "make_tools",
]
