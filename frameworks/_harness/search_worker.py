"""The search tool's matcher, run as its own process so a time cap can kill it.

Reads one JSON job on stdin, ``{"pattern", "files": [[rel, text], ...], "max_hits"}``, and
writes ``{"hits": ["rel:line: text", ...]}`` (at most ``max_hits`` + 1, so the caller knows
there were more). The pattern is a Python regular expression, or a plain substring when it
does not compile. Stdlib only; the caller (tool_specs._search) kills it at its time cap.
"""

from __future__ import annotations

import json
import re
import sys


def main() -> int:
    job = json.loads(sys.stdin.buffer.read())
    pattern, limit = job["pattern"], int(job["max_hits"])
    try:
        match = re.compile(pattern).search
    except (re.error, RecursionError, OverflowError, ValueError):
        match = lambda line: pattern in line  # noqa: E731 - substring fallback
    hits = []
    for rel, text in job["files"]:
        for no, line in enumerate(text.splitlines(), 1):
            if match(line):
                hits.append(f"{rel}:{no}: {line}")
                if len(hits) > limit:
                    break
        if len(hits) > limit:
            break
    sys.stdout.write(json.dumps({"hits": hits}, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
