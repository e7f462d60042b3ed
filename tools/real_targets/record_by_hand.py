"""Send requests by hand to a served target and save each answer as a recorded transcript.

    python tools/real_targets/run.py --targets mlx-lm --serve 600      # prints URL and key
    python tools/real_targets/record_by_hand.py URL OUT_DIR --server "mlx-lm 0.32.2 ..." \
        --family mlx-lm --label "one-item prompt list" BODY.json [BODY.json ...]

Each BODY.json is a request body, sent in order as ``POST URL/v1/completions`` (one
connection each, no retry), with ``$CONFORMANCE_API_KEY`` as the bearer key when it is set.
Use it for exchanges the suite does not make in that order (e.g. the request after the
one that killed a server). The answers are saved like record_transcripts.py saves the
suite's: redacted, with provenance ``recorded`` whose command is this invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import transcript

from conformance.judging.document.spec import BUILTIN_SPECS
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.run.fetch import Fetch, load_spec


def record(url: str, bodies: list[dict[str, object]], label: str) -> list[Exchange]:
    key = os.environ.get("CONFORMANCE_API_KEY", "")
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    out = []
    for i, body in enumerate(bodies, 1):
        raw = json.dumps(body).encode()
        with httpx.Client(timeout=60) as client:
            resp = client.post(url.rstrip("/") + "/v1/completions", content=raw, headers=headers)
            data = resp.read()
        case = Case(dict(body), label=f"{label} ({i} of {len(bodies)})")
        out.append(
            Exchange(
                case=case,
                url=url,
                request_headers=headers,
                request_body=raw,
                status=resp.status_code,
                headers=Headers(list(resp.headers.multi_items())),
                body=data,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("out", type=Path)
    parser.add_argument("bodies", nargs="+", type=Path)
    parser.add_argument("--server", required=True, help="server name and version")
    parser.add_argument("--family", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--spec", default="aihubmix")
    args = parser.parse_args(argv)
    bodies = [json.loads(p.read_text(encoding="utf-8")) for p in args.bodies]
    # The document the answers are judged by, read first (``target``: the served one, which
    # a request may kill) and kept beside them unless vendored, for re-judging them later.
    key = os.environ.get("CONFORMANCE_API_KEY")
    spec = load_spec(args.spec, fetch=Fetch(api_key=key, target_url=args.url))
    args.out.mkdir(parents=True, exist_ok=True)
    document = None
    if args.spec not in BUILTIN_SPECS:
        document = transcript.keep_document(spec.path, args.out, spec.origin)
    exchanges = record(args.url, bodies, args.label)
    command = "python tools/real_targets/record_by_hand.py URL OUT " + " ".join(
        json.dumps(b, separators=(",", ":")) for b in bodies
    )
    provenance = {
        "kind": "recorded",
        "server": args.server,
        "version": args.server,
        "command": command + " (in this order, against python tools/real_targets/run.py --serve)",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    source = {
        "family": args.family,
        "server": args.server,
        "obtained": f"recorded from {args.family} run locally by tools/real_targets "
        "(--serve, requests sent by record_by_hand.py)",
    }
    for i, exchange in enumerate(exchanges, 1):
        data = transcript.to_transcript(
            exchange,
            spec=args.spec,
            source=source,
            secrets=[key or ""],
            provenance=provenance,
            document=document,
        )
        data["judged_failed"] = sorted(transcript.judge(data, spec))
        path = args.out / f"{i:04d}-by-hand.json"
        transcript.dump(data, path)
        print(path, exchange.status, data["judged_failed"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
