"""Replay each finding's curl against a running target, to classify it by what comes back.

    python tools/real_targets/replay.py WORK/results/X/results.json --url http://127.0.0.1:P
        [--examples 2] [--out DIR]

For every requirement that failed, up to ``--examples`` distinct findings (by message): the
curl reproducer the report gives (``examples[].curl``), pointed at ``--url`` and run as it
is, with the key from $CONFORMANCE_API_KEY, under a 30 s bound (``curl -m 30``, the
suite's first-byte bound). What the server answered (status line, headers, body excerpt)
goes to ``replays.json`` and ``replays.md`` beside the results (or in ``--out``): the raw
material for classifying each
finding as true, false alarm or misattribution in docs/real-targets.md. run.py calls it
after each suite run, on a freshly started server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

BOUND_SECONDS = 30  # the suite's own first-byte bound: a runaway answer is not waited out
EXCERPT = 1500
RUNAWAY = '"max_tokens": 0'
_ORIGIN = re.compile(r"https?://127\.0\.0\.1:\d+")


def replay_all(
    results: Path, url: str, examples: int = 2, key: str | None = None
) -> list[dict[str, Any]]:
    """Replay the findings of one results.json against ``url`` (with ``key``, else
    $CONFORMANCE_API_KEY); return the records."""
    data = json.loads(results.read_text(encoding="utf-8"))
    chosen = []
    for req in data["requirements"]:
        if not req.get("failed"):
            continue
        seen: set[str] = set()
        for ex in req.get("examples", []):
            if not ex.get("curl") or ex["message"] in seen:
                continue
            seen.add(ex["message"])
            if len(seen) > examples:
                break
            chosen.append((req, ex))
    # Unlimited answers last (max_tokens 0 is "no limit" on some servers, which keep
    # generating after curl gives up): the replays after them would wait in their queue.
    chosen.sort(key=lambda pair: RUNAWAY in pair[1]["curl"])
    return [
        {
            "requirement": req["id"],
            "level": req["level"],
            "failed": f"{req['failed']}/{req['checked']}",
            "message": ex["message"],
            "case": ex.get("case"),
            "run_status": ex.get("status"),
            **_run(_ORIGIN.sub(url.rstrip("/"), ex["curl"], count=1), key),
        }
        for req, ex in chosen
    ]


def _run(curl: str, key: str | None) -> dict[str, Any]:
    # The report's curl, made to print the status line and headers, bounded in time.
    command = curl.replace("curl -sS ", f"curl -sS -i -m {BOUND_SECONDS} ", 1)
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            timeout=BOUND_SECONDS + 10,
            env={**os.environ, **({"CONFORMANCE_API_KEY": key} if key else {})},
        )
    except subprocess.TimeoutExpired:
        return {"curl": curl, "replay": None, "replay_error": f"no end in {BOUND_SECONDS} s"}
    out = done.stdout.decode("utf-8", "replace")
    head, _, body = out.replace("\r\n", "\n").partition("\n\n")
    status = head.split("\n", 1)[0] if head else None
    return {
        "curl": curl,
        "replay": status,
        "replay_headers": head.split("\n")[1:] if head else [],
        "replay_body": body[:EXCERPT],
        "replay_error": done.stderr.decode("utf-8", "replace").strip() or None,
    }


def write(records: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "replays.json").write_text(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    lines = ["| requirement | level | failed | finding | replayed |", "|---|---|---|---|---|"]
    for r in records:
        answer = r.get("replay") or r.get("replay_error") or "?"
        body = (r.get("replay_body") or "").replace("\n", " ").replace("|", "\\|")[:300]
        message = r["message"].replace("|", "\\|")[:300]
        lines.append(
            f"| {r['requirement']} | {r['level']} | {r['failed']} | {message} | "
            f"{answer}: `{body}` |"
        )
    (out / "replays.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--url", required=True, help="the running target's base URL")
    parser.add_argument("--examples", type=int, default=2)
    parser.add_argument("--out", type=Path, help="default: beside the results")
    args = parser.parse_args(argv)
    records = replay_all(args.results, args.url, args.examples)
    write(records, args.out or args.results.parent)
    print(f"{len(records)} finding(s) replayed: {(args.out or args.results.parent) / 'replays.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
