#!/usr/bin/env python3
"""claimgrid's command line. ``uv run grid.py`` runs the full default matrix offline.

See ``uv run grid.py --help`` and README.md.
"""

import os
import sys

from claimgrid.commands.cli import INTERRUPTED, main

if __name__ == "__main__":
    code = main(sys.argv[1:])
    if code == INTERRUPTED:
        # Ctrl-C: everything is killed and the ledger is consistent; skip the interpreter's
        # teardown (library atexit handlers cost seconds) so the grid stops within 5 s.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
