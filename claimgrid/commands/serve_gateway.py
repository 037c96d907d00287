"""``grid.py gateway``: run the gateway alone with a demo token per reference model."""

from __future__ import annotations

import argparse
import threading

from claimgrid.commands.validate import OneLineParser
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import load_tasks
from claimgrid.reference.registry import default_substitute
from claimgrid.reference.script import REFERENCE_MODEL_NAMES, CallLimits, RunScript

DEMO_TASK, DEMO_CONTENT, DEMO_SWAP = "write-status", "clean", "none"


def demo_scripts() -> dict[str, RunScript]:
    """token -> script: ``demo-<model>`` for every reference model on the demo cell."""
    task = load_tasks()[DEMO_TASK]
    content = load_content_conditions()[DEMO_CONTENT]
    swap = load_swap_conditions()[DEMO_SWAP]
    return {
        f"demo-{m}": RunScript.for_cell(
            f"demo-{m}",
            task,
            content,
            swap,
            m,
            default_substitute(),
            task.role,
            limits=CallLimits(max_model_calls=1_000_000),
        )
        for m in REFERENCE_MODEL_NAMES
    }


def serve_cli(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="grid.py gateway", description="Serve the claimgrid model gateway with demo tokens.")
    parser.parse_args(argv)
    from claimgrid.gateway.server import Gateway

    gw = Gateway()
    url = gw.start()
    for token, script in demo_scripts().items():
        gw.register(token, script)
    print(f"claimgrid gateway: {url}  (task {DEMO_TASK}, content {DEMO_CONTENT}, swap {DEMO_SWAP})")
    for token in demo_scripts():
        print(f"  model {token.removeprefix('demo-'):<13} api_key {token}")
    from claimgrid.gateway.dialects import dialects

    root = url.removesuffix("/v1")
    for dialect in dialects():  # one port, three API dialects (docs/adapter-authors.md)
        print(f"  dialect {dialect.name:<18} POST {root}{dialect.paths[0]}")
    print(f"  (Anthropic clients: ANTHROPIC_BASE_URL={root}; OpenAI clients: base_url {url})")
    print(
        f'try: litellm.completion(model="openai/diligent", api_base="{url}", api_key="demo-diligent", '
        'messages=[{"role": "user", "content": "go"}])'
    )
    print("Ctrl-C to stop.", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        gw.stop()
    return 0


def add_parser(sub) -> None:
    """``grid.py gateway ...``: everything after it goes to serve_cli."""
    gw = sub.add_parser("gateway", help="start the harness model gateway alone and print its URL")
    gw.add_argument("rest", nargs=argparse.REMAINDER)
