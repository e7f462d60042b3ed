"""The suite's command-line options, and their translation into a runner-agnostic Setup.

Importing this module costs nothing beyond pytest itself: the plugin loads it in every
pytest process, including those that never run the suite.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from conformance.front.arguments import INTEGER, NUMBER, in_suite, one_of
from conformance.front.arguments import SUITE_DIR as SUITE_DIR

if TYPE_CHECKING:
    from conformance.run.session import Setup

API_KEY_ENV = "CONFORMANCE_API_KEY"
BUILTIN = ("aihubmix", "nscale", "openai")  # spec.BUILTIN_SPECS, without importing the spec model
DEFAULT_CONCURRENCY = 16


def add_options(parser: pytest.Parser) -> None:
    from conformance.judging.document.contract import (  # light
        CONTRACT_HELP,
        DEFAULT_CONTRACT,
        Contract,
    )
    from conformance.judging.document.policies import strict_help  # light: no spec is loaded

    add = parser.getgroup("conformance", "completions conformance suite").addoption
    add(
        "--target-url",
        help="Base URL of the target (the spec's path is appended; a trailing "
        "/v1 is accepted and reported). Default: start the embedded reference target.",
    )
    add("--api-key", help=f"API key sent as a bearer token (default: ${API_KEY_ENV}).")
    add(
        "--model",
        help="Model name sent in every request (default with the embedded "
        "target: reference-model, the only model it serves).",
    )
    add(
        "--spec",
        default="aihubmix",
        help=f"{' | '.join(BUILTIN)} | PATH or http(s) URL of an OpenAPI document | target "
        "(the target's own /openapi.json, then /v1/openapi.json) (default: aihubmix).",
    )
    add(
        "--strict-spec",
        action="store_true",
        help=strict_help(),
    )
    add(
        "--contract",
        type=one_of(*(c.value for c in Contract)),
        default=DEFAULT_CONTRACT.value,
        help="How the document binds the target: "
        + "; ".join(f"{c.value}: {CONTRACT_HELP[c]}" for c in Contract)
        + f" (default: {DEFAULT_CONTRACT.value}).",
    )
    # pytest owns --strict, so the level switch has a longer name.
    add("--strict-should", action="store_true", help="SHOULD findings fail the run too.")
    add(
        "--max-examples",
        type=INTEGER,
        default=10,
        help="Generated requests per generated test (default 10: tokens cost money).",
    )
    add("--max-tokens", type=INTEGER, default=8, help="Upper bound on max_tokens (default 8).")
    add(
        "--budget-requests",
        type=INTEGER,
        default=500,
        help="Most requests in the run (default 500).",
    )
    add(
        "--budget-tokens",
        type=INTEGER,
        default=100_000,
        help="Most tokens (as the target reports them) in the run (default 100000).",
    )
    add(
        "--vocab-size",
        type=INTEGER,
        default=1000,
        help="Token ids in token prompts are drawn below this (default 1000).",
    )
    add("--seed", type=INTEGER, default=0, help="Seed of request generation (default 0).")
    add(
        "--fuzz",
        type=INTEGER,
        default=0,
        metavar="N",
        help="Also send N requests drawn from schemathesis's own generation (positive, "
        "negative and coverage phases), judged by the same requirements: a deep, nightly "
        "scenario (needs the [fuzz] extra; default 0: off).",
    )
    add(
        "--concurrency",
        type=INTEGER,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"Requests in flight at once per process for independent requests (default "
        f"{DEFAULT_CONCURRENCY}: real endpoints answer in 0.3-3 s; a default run's ~155 "
        "requests at 16 in flight take ~15 s against a 1 s endpoint, and the client halves "
        "its limit on every 429, so a rate-limited key is not hammered; 1 sends one after "
        "another).",
    )
    # pytest-timeout owns --timeout, so the per-request bound has a longer name.
    add(
        "--request-timeout",
        type=NUMBER,
        default=30.0,
        help="Seconds to wait for the first byte of an answer (default 30).",
    )
    add(
        "--stream-gap",
        type=NUMBER,
        default=15.0,
        help="Most seconds between two reads of a response (default 15).",
    )
    add(
        "--stream-total",
        type=NUMBER,
        default=120.0,
        help="Most seconds for one response (default 120).",
    )
    add(
        "--max-body-bytes",
        type=INTEGER,
        default=16 * 1024 * 1024,
        help="Most bytes read from one response (default 16 MiB).",
    )
    add(
        "--rps",
        type=NUMBER,
        default=None,
        help="Most requests per second, summed over xdist workers (default: unpaced).",
    )
    add(
        "--header",
        action="append",
        default=[],
        metavar="'Name: value'",
        help="Extra request header (repeatable); its value is redacted in every output.",
    )
    add("--checks", default="", help="Comma-separated requirement IDs to run (default all).")
    add("--skip-checks", default="", help="Comma-separated requirement IDs to skip.")
    add(
        "--require-capabilities",
        default="",
        metavar="LIST",
        help="Comma-separated capabilities (e.g. echo,logprobs) the target must offer: one "
        "declined or ignored fails the run.",
    )
    add(
        "--report-dir",
        default="reports/out",
        help="Where the reports are written (default reports/out).",
    )
    add(
        "--baseline",
        metavar="FILE",
        help="results.json of an earlier run: requirements failing there are reported as "
        "known and do not fail this run; new failures do; fixed ones are listed.",
    )
    add(
        "--shard",
        metavar="K/N",
        help="Run only the K-th of N deterministic slices of the suite (1-based), to split a "
        "run across CI jobs; merge their results.json with conformance-merge.",
    )


def suite_requested(config: pytest.Config) -> bool:
    """Whether this pytest invocation collects the conformance suite."""
    return any(in_suite(arg, config.invocation_params.dir) for arg in config.args)


def csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def headers(values: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for value in values:
        name, sep, rest = value.partition(":")
        if not sep or not name.strip():
            raise pytest.UsageError(f"conformance: --header {value!r}: expected 'Name: value'")
        out.append((name.strip(), rest.strip()))
    return tuple(out)


def parse_shard(value: str) -> tuple[int, int]:
    k, sep, n = value.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise pytest.UsageError(
            f"conformance: --shard {value!r}: expected K/N with 1 <= K <= N (e.g. 2/3)"
        )
    return int(k), int(n)


def setup_from(config: pytest.Config) -> Setup:
    """The Setup the command line asks for."""
    from conformance.judging.document.contract import Contract
    from conformance.run.client import Limits
    from conformance.run.session import Settings, Setup

    opt = config.option
    if opt.shard:
        parse_shard(opt.shard)
    # Every other value is checked by assembly.assemble (option_values), runner-agnostic.
    if opt.target_url and not opt.model:
        raise pytest.UsageError("conformance: --model is required with --target-url")
    settings = Settings(
        model=opt.model or "reference-model",
        max_examples=opt.max_examples,
        max_tokens=opt.max_tokens,
        vocab_size=opt.vocab_size,
        seed=opt.seed,
        strict=opt.strict_should,
        budget_requests=opt.budget_requests,
        budget_tokens=opt.budget_tokens,
        checks=csv(opt.checks),
        skip_checks=csv(opt.skip_checks),
        concurrency=opt.concurrency,
        require_capabilities=csv(opt.require_capabilities),
        fuzz=opt.fuzz,
    )
    limits = Limits(
        ttfb=opt.request_timeout,
        gap=opt.stream_gap,
        total=opt.stream_total,
        max_bytes=opt.max_body_bytes,
    )
    return Setup(
        settings=settings,
        spec=opt.spec,
        strict_spec=opt.strict_spec,
        contract=Contract(opt.contract),
        target_url=opt.target_url,
        api_key=opt.api_key or os.environ.get(API_KEY_ENV) or None,
        headers=headers(opt.header),
        limits=limits,
        rps=opt.rps,
        baseline=opt.baseline,
        workers=int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1),
        preflight=not hasattr(config, "workerinput") and not opt.collectonly,
    )
