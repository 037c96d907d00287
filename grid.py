#!/usr/bin/env python3
"""claimgrid's command line. ``uv run grid.py`` runs the full default matrix offline.

See ``uv run grid.py --help`` and README.md.
"""

import sys

from claimgrid.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
