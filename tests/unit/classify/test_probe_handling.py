"""The ``extra-args`` probe's handling, from gateway and tool events (claimgrid.classify.reactions)."""

import json

import pytest

from claimgrid.classify.reactions import probe_handling
from claimgrid.reference import shapes
from claimgrid.reference.registry import fault_models
from claimgrid.store.events import GatewayExchange, ToolCall

# The probe whose first call sends an argument the schema lacks (found by its shape, not named).
EXTRA = next(m for m in fault_models() if shapes.shape_of(m) == "extra_args")
TICKET = "# Ticket\nadd() drops the fraction of a float.\n"
ASKED = {"path": "TICKET.md", "encoding": "utf-8"}


def gw(i, calls=(), results=None):
    return GatewayExchange(
        call_index=i,
        status=200,
        tool_results=results,
        tool_calls=[{"id": f"c{i}", "name": n, "arguments": json.dumps(a)} for n, a in calls],
    )


def tool(seq, args, result):
    return ToolCall(seq=seq, tool="read_file", category="read", args=args, ok=True, result=result)


def handling(gateway, tools):
    return probe_handling(EXTRA, gateway, tools, "reported DONE")


def test_a_framework_that_drops_the_extra_argument_and_runs_the_call():
    # AutoGen: its pydantic argument model ignores the unknown key; the result goes back.
    gateway = [gw(0, [("read_file", ASKED)]), gw(1, [], [TICKET])]
    value, lines = handling(gateway, [tool(0, {"path": "TICKET.md"}, TICKET)])
    assert value == "dropped the extra arguments"
    assert lines[1] == "tools: seq 0 ran read_file without encoding"


@pytest.mark.parametrize("message", [json.dumps({"result": TICKET}), "", "the file was read"])
def test_a_drop_is_read_from_the_tool_layer_whatever_the_tool_message_holds(message):
    # Google ADK answers with {"result": "..."}; the tool layer's record alone decides.
    gateway = [gw(0, [("read_file", ASKED)]), gw(1, [], [message])]
    value, lines = handling(gateway, [tool(0, {"path": "TICKET.md"}, TICKET)])
    assert value == "dropped the extra arguments"
    assert lines[2] == "tools: ran those arguments 1 time(s); the model asked for them 0 time(s)"


def test_a_drop_then_the_same_call_asked_again_is_still_a_drop():
    # The tool layer ran the plain arguments twice; the model asked for them once.
    gateway = [
        gw(0, [("read_file", ASKED)]),
        gw(1, [("read_file", {"path": "TICKET.md"})], [json.dumps({"result": TICKET})]),
        gw(2, [], [json.dumps({"result": TICKET})] * 2),
    ]
    tools = [tool(0, {"path": "TICKET.md"}, TICKET), tool(1, {"path": "TICKET.md"}, TICKET)]
    assert handling(gateway, tools)[0] == "dropped the extra arguments"


def test_a_refused_call_followed_by_the_same_call_without_it_stays_refused():
    # The framework answered the first call with an error; the model then sent the plain call.
    refusal = "Error: unexpected argument 'encoding'"
    gateway = [
        gw(0, [("read_file", ASKED)]),
        gw(1, [("read_file", {"path": "TICKET.md"})], [refusal]),
        gw(2, [], [refusal, TICKET]),
    ]
    value, _ = handling(gateway, [tool(0, {"path": "TICKET.md"}, TICKET)])
    assert value == "refused the arguments"


@pytest.mark.parametrize("args", [ASKED, {"path": "TICKET.md", "encoding": "utf-8", "mode": "r"}])
def test_the_same_or_more_arguments_are_not_a_drop(args):
    gateway = [gw(0, [("read_file", ASKED)]), gw(1, [], [TICKET])]
    value, _ = handling(gateway, [tool(0, args, TICKET)])
    assert value == ("passed the arguments to the tool" if args == ASKED else "refused the arguments")
