"""``completions-conformance`` / ``python -m conformance``: the suite from any directory.

Runs ``pytest --pyargs conformance`` with the given options, so an installed copy needs no
checkout: ``completions-conformance --target-url URL --model M --spec nscale``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import pytest

    args = sys.argv[1:] if argv is None else argv
    # schemathesis's pytest plugin ([fuzz] extra) is not used by the suite: 0.5 s CPU saved.
    fixed = ["--pyargs", "conformance", "-p", "no:cacheprovider", "-p", "no:schemathesis"]
    return int(pytest.main([*fixed, *args]))


if __name__ == "__main__":
    sys.exit(main())
