"""``completions-conformance`` / ``python -m conformance``: the suite from any directory.

The command line lives in conformance/front/cli.py (``run`` by default: ``pytest --pyargs
conformance`` with the given options, so an installed copy needs no checkout).
"""

from __future__ import annotations

import sys

from conformance.front.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
