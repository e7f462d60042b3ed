"""``completions-conformance`` / ``python -m conformance``: the suite from any directory.

Runs ``pytest --pyargs conformance`` with the given options, so an installed copy needs no
checkout: ``completions-conformance --target-url URL --model M --spec nscale``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import pytest

    args = sys.argv[1:] if argv is None else argv
    # Plugins of installed packages the suite does not use (as in pyproject's addopts):
    # schemathesis's ([fuzz] extra) costs 0.5 s of CPU, anyio's 0.4 s, platformdirs' 0.1 s.
    unused = ["-p", "no:schemathesis", "-p", "no:anyio", "-p", "no:platformdirs"]
    fixed = ["--pyargs", "conformance", "-p", "no:cacheprovider", *unused]
    return int(pytest.main([*fixed, *args]))


if __name__ == "__main__":
    sys.exit(main())
