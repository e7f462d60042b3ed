"""Count the transcripts of tests/transcripts per family and provenance kind.

    python tools/real_targets/provenance.py            # print the table
    python tools/real_targets/provenance.py --readme   # rewrite it in tests/transcripts/README.md

Every transcript says whether its bytes were recorded from a real server, modelled on a
cited source, or moved from another endpoint (transcript.py, `provenance`). The table is
kept in the corpus README between the `<!-- provenance -->` markers; a test checks it is
current.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import transcript

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "transcripts"
README = CORPUS / "README.md"
START, END = "<!-- provenance -->", "<!-- /provenance -->"


def counts(corpus: Path = CORPUS) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for path in sorted(corpus.glob("*/*.json")):
        kind = (transcript.load(path).get("provenance") or {}).get("kind", "none")
        out.setdefault(path.parent.name, Counter())[kind] += 1
    return out


def table(by_family: dict[str, Counter[str]]) -> str:
    kinds = transcript.PROVENANCE_KINDS
    rows = ["| family | " + " | ".join(kinds) + " | total |", "|---" * (len(kinds) + 2) + "|"]
    total: Counter[str] = Counter()
    for family, c in sorted(by_family.items()):
        total.update(c)
        rows.append(
            f"| {family} | " + " | ".join(str(c[k]) for k in kinds) + f" | {sum(c.values())} |"
        )
    rows.append(
        "| **all** | "
        + " | ".join(f"**{total[k]}**" for k in kinds)
        + f" | **{sum(total.values())}** |"
    )
    return "\n".join(rows)


def with_table(readme: str, text: str) -> str:
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{text}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", action="store_true", help=f"rewrite the table in {README}")
    args = parser.parse_args(argv)
    text = table(counts())
    if args.readme:
        README.write_text(with_table(README.read_text(encoding="utf-8"), text), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
