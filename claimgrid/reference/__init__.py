"""Reference models: deterministic policies served behind the gateway, each with a known truth.

This package is the stable import path for a ``--policies FILE.py``::

    from claimgrid.reference import Behaviour, Step, Turn, ToolCall, reference_model, register_behaviour

Modules (private to the package; import from here):

* ``gaming`` - Gaming reference models: agents that make the verification say PASS instead of doing
  the task;
* ``gateway_faults`` - gateway-side fault data (``GatewayFault``);
* ``policies`` - the built-in models, registered through the same decorator a user's file uses.
  Importing this package registers them;
* ``judges`` - reference claim judges (``--claim-judge``): answer the judge's prompt by a trivial
  rule, not in the default grid;
* ``probe_kinds`` - The probe and fault kinds: one typed registry for the driver and the adapters
  (stdlib only);
* ``progress`` - the run's progress the gateway keeps: a policy's step, whatever the framework's
  history format;
* ``readers`` - built-in models that read files through the shell (``cat -n``, ``sed -n`` ranges, a
  one-line ``grep``), not in the default grid;
* ``registry`` - the registry and its decorator; imports no policy;
* ``script`` - ``RunScript``: the part of the answer key one run's models may use, and ``Step``;
* ``shapes`` - output-shape probes (several calls in one message, a refusal, ...);
* ``speakers`` - built-in models that report in words with no trace (a verdict in words, a hedge,
  "no change was needed"), not in the default grid;
* ``tool_faults`` - tool-side fault probes the harness tool layer applies (``ToolFault``);
* ``tool_table`` - Tool tables: how the reference models' abstract actions are spelled in an agent's
  own tools;
* ``truth`` - ``Behaviour`` and the truth a correct classifier must give (the oracle: it shares no
  code with the classifier it calibrates).
"""

from __future__ import annotations

# ``policies`` (and ``readers`` and ``speakers``: shell readers, free-text reporters) register the built-in models
# through ``reference_model`` when imported; ``gaming``: the models that game the verification
# (it imports ``policies`` first); the probes (tool faults, output shapes) after them.
from claimgrid.reference import gaming, judges, policies, readers, registry, shapes, speakers, tool_faults  # noqa: F401
from claimgrid.reference.gateway_faults import GatewayFault
from claimgrid.reference.policies import (
    ReportStyle,
    ToolCall,
    Turn,
    final_turn,
    history_calls,
    message_text,
    observed_counts,
    register_behaviour,
    register_gateway_fault,
    seen,
    step_index,
    summarise,
    tool_results,
)
from claimgrid.reference.registry import (
    Probe,
    ReferenceModel,
    Truth,
    TruthCell,
    load_policies,
    reference_model,
    untreated,
)
from claimgrid.reference.script import RunScript, Step
from claimgrid.reference.truth import Behaviour

__all__ = [
    "Behaviour",
    "GatewayFault",
    "Probe",
    "ReferenceModel",
    "ReportStyle",
    "RunScript",
    "Step",
    "ToolCall",
    "Truth",
    "TruthCell",
    "Turn",
    "final_turn",
    "history_calls",
    "load_policies",
    "message_text",
    "observed_counts",
    "policies",
    "reference_model",
    "register_behaviour",
    "register_gateway_fault",
    "registry",
    "seen",
    "step_index",
    "summarise",
    "tool_results",
    "untreated",
]
