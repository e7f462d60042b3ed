"""The figures of docs/spec-driven.md: a default run (and a deep-fuzz run) against the
logging target, per spec, judged by the vendored document and by a tightened copy.

    python tools/spec_log_figures.py [--fuzz 200] [--out DIR]

Prints one JSON line per run: requests logged per mode (from the X-Conformance-Case
header), how many of each openapi-core validated against the document the target was
given, requests sent as valid/edge/probe that it rejected, invalid requests that do not
break their named rule, and the prompt forms among valid requests.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import request_log  # noqa: E402
import test_spec_tightened_log as proof  # type: ignore[import-not-found]  # noqa: E402

from conformance.front.runner import run_suite  # noqa: E402
from conformance.judging.document.spec import BUILTIN_SPECS, specs_dir  # noqa: E402
from conformance.run.scenarios import DEEP_FUZZ  # noqa: E402
from conformance.run.session import Settings, Setup  # noqa: E402


def measure(name: str, document: str, out: Path, fuzz: int = 0) -> dict[str, object]:
    if document == "tightened":
        spec_path = proof.write_copy(name, out)
    else:
        spec_path = specs_dir() / f"{name}.yaml"
    log_path = out / f"{name}-{document}-{fuzz}.jsonl"
    server = request_log.logging_target(
        spec_path, log_path, flavor=name, api_key=proof.API_KEY, models=(proof.MODEL,)
    )
    url = server.start()
    try:
        settings = Settings(model=proof.MODEL, concurrency=8, fuzz=fuzz, budget_requests=1000)
        setup = Setup(settings=settings, spec=str(spec_path), target_url=url, api_key=proof.API_KEY)
        outcome = run_suite(setup, scenarios=(DEEP_FUZZ,) if fuzz else None)
    finally:
        server.stop()
    log = request_log.read_log(log_path)
    valid = [e for e in log if e["case"]["mode"] == "valid" and isinstance(e["body"], dict)]
    return {
        "spec": name,
        "document": document,
        "fuzz": fuzz,
        "verdict": outcome.verdict.word,
        "logged": len(log),
        "by_mode": dict(Counter(e["case"]["mode"] for e in log)),
        "validated": dict(Counter(e["case"]["mode"] for e in log if e["valid"])),
        "sent_as_valid_but_rejected": len(proof.valid_but_rejected(log)),
        "invalid_not_breaking_their_rule": None if fuzz else len(proof.wrong_breaks(log)),
        "forms_sent_as_valid": sorted({proof.form_of(e["body"].get("prompt")) for e in valid}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzz", type=int, default=200, help="deep-fuzz cases (0: none)")
    parser.add_argument("--out", type=Path, help="keep the logs here")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="spec-log-"))
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(BUILTIN_SPECS):
        for document in ("vendored", "tightened"):
            print(json.dumps(measure(name, document, out)), flush=True)
        if args.fuzz:
            print(json.dumps(measure(name, "vendored", out, args.fuzz)), flush=True)
    print(f"logs: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
