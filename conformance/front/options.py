"""The suite's command-line options (from the one table, option_table.py), and their
translation into a runner-agnostic Setup.

Importing this module costs nothing beyond pytest itself: the plugin loads it in every
pytest process, including those that never run the suite.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from conformance.front import option_table
from conformance.front.arguments import SUITE_DIR as SUITE_DIR
from conformance.front.arguments import in_suite
from conformance.front.option_table import API_KEY_ENV

if TYPE_CHECKING:
    from conformance.run.session import Setup


def add_options(parser: pytest.Parser) -> None:
    """The pytest door's options, from the one table (conformance/front/option_table.py)."""
    group = parser.getgroup("conformance", "completions conformance suite")
    for option in option_table.of(option_table.PYTEST):
        group.addoption(option.flag, **option.argument(option_table.PYTEST))


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
