"""Print the findings of one or more results.json files, one block per failing requirement.

    python tools/real_targets/findings.py WORK/results/*/results.json [--examples N]

For each requirement that failed (or was declined, a CAPABILITY): its ID, level, how many
exchanges failed of how many judged, and up to N distinct messages, each with the case
that provoked it and a curl reproducer (reads the key from $CONFORMANCE_API_KEY). The
raw material for verifying each finding by hand (docs/real-targets.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--curl", action="store_true", help="print the curl reproducers")
    parser.add_argument("--body", action="store_true", help="print the response excerpts")
    args = parser.parse_args(argv)
    for path in args.results:
        data = json.loads(path.read_text(encoding="utf-8"))
        meta = data["meta"]
        print(f"## {path.parent.name}: {meta.get('target')} spec={meta.get('spec')} "
              f"verdict={meta.get('verdict')}")  # fmt: skip
        for req in data["requirements"]:
            if not (req["failed"] or req.get("unsupported")):
                continue
            print(
                f"- {req['id']} [{req['level']}] failed {req['failed']}/{req['checked']}"
                + (f", declined {req['unsupported']}" if req.get("unsupported") else "")
            )
            seen: set[str] = set()
            for ex in req.get("examples", []):
                if ex["message"] in seen:
                    continue
                seen.add(ex["message"])
                if len(seen) > args.examples:
                    break
                print(f"    * {ex['message']}")
                print(f"      case: {ex.get('case')} ({ex.get('mode')}) -> {ex.get('status')}")
                if args.body:
                    print(f"      body: {str(ex.get('body_excerpt'))[:600]!r}")
                if args.curl:
                    print(f"      {ex.get('curl')}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
