"""Serve the reference target in the foreground: ``python -m conformance.reference``.

    python -m conformance.reference --flavor aihubmix --port 8000 \\
        [--host 127.0.0.1] [--api-key K] [--model M ...] [--fault NAME ...] \\
        [--delay S] [--chunk-delay S]

Ctrl-C stops it. Bad input ends with one ``ERROR:`` line and exit status 4.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.reference.faults import FAULTS
from conformance.reference.flavors import FLAVORS
from conformance.reference.server import ReferenceServer, serve_until_signalled


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        _fail(message)


def _fail(message: str) -> NoReturn:
    print(f"ERROR: {message}", file=sys.stderr)
    sys.exit(BAD_INPUT)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds, not {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m conformance.reference",
        description="Serve the embedded reference target (a conformant /v1/completions server, "
        "with optional faults) until Ctrl-C.",
    )
    parser.add_argument("--flavor", choices=sorted(FLAVORS), default="aihubmix")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    parser.add_argument(
        "--model",
        action="append",
        help="a model name it serves (repeatable; default: reference-model)",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="switch a fault on (repeatable); names: conformance/reference/faults*.py",
    )
    parser.add_argument(
        "--delay", type=_seconds, default=0.0, help="seconds before the first byte of a completion"
    )
    parser.add_argument(
        "--chunk-delay", type=_seconds, default=0.0, help="seconds between stream events"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    unknown = sorted(set(args.fault) - FAULTS.keys())
    if unknown:
        _fail(f"unknown fault(s) {', '.join(unknown)}; see conformance/reference/faults.py")
    if not 0 <= args.port <= 65535:
        _fail(f"--port must be between 0 and 65535, not {args.port}")
    try:
        server = ReferenceServer(
            args.flavor,
            api_key=args.api_key,
            models=tuple(args.model or ("reference-model",)),
            faults=frozenset(args.fault),
            host=args.host,
            port=args.port,
            delay=args.delay,
            chunk_delay=args.chunk_delay,
        )
    except ValueError as exc:
        _fail(str(exc))
    try:
        url = server.start()
    except (OSError, RuntimeError) as exc:
        _fail(f"cannot serve on {args.host}:{args.port}: {exc}")
    faults = f", faults: {', '.join(sorted(args.fault))}" if args.fault else ""
    serve_until_signalled(
        server, f"reference target ({args.flavor}{faults}) at {url}/v1 (Ctrl-C stops it)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
