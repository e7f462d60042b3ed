"""The pytest plugin (entry point ``pytest11``): options, the run, the target, the reports.

It stays inert unless the suite itself (the ``conformance`` package's tests) is being
run, so installing the package does not slow down or change other pytest runs. Bad input
(unknown spec, unreadable spec path, unreachable target, missing or wrong key) ends the
run with one ``ERROR:`` line and no traceback.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance import __version__
from conformance.client import Client, Limits, Pacer, RetryPolicy
from conformance.engine import (
    EXIT_NO_VERDICT,
    ItemRun,
    Run,
    Settings,
    no_verdict_reason,
    status_summary,
)
from conformance.exchange import Exchange
from conformance.requirements import REGISTRY, load_checks
from conformance.results import OBSERVED, Results
from conformance.spec import BUILTIN_SPECS, SpecError, load_spec

SUITE_DIR = Path(__file__).resolve().parent
API_KEY_ENV = "CONFORMANCE_API_KEY"
RUN_KEY = pytest.StashKey["Run"]()
RESULTS_KEY = pytest.StashKey[Results]()
BASELINE_KEY = pytest.StashKey[Results]()
ITEM_KEY = pytest.StashKey[ItemRun]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "completions conformance suite")
    add = group.addoption
    add(
        "--target-url",
        help="Base URL of the target (the spec's path is appended). "
        "Default: start the embedded reference target on 127.0.0.1.",
    )
    add("--api-key", help=f"API key sent as a bearer token (default: ${API_KEY_ENV}).")
    add(
        "--model",
        help="Model name sent in every request (default with the embedded "
        "target: reference-model).",
    )
    add(
        "--spec",
        default="aihubmix",
        help=f"{' | '.join(BUILTIN_SPECS)} | PATH of an OpenAPI document (default: aihubmix).",
    )
    add(
        "--strict-spec",
        action="store_true",
        help="Apply no errata: judge by the documents exactly as written.",
    )
    # pytest owns --strict, so the level switch has a longer name.
    add("--strict-should", action="store_true", help="SHOULD findings fail the run too.")
    add(
        "--max-examples",
        type=int,
        default=10,
        help="Generated requests per generated test (default 10: tokens cost money).",
    )
    add(
        "--max-tokens",
        type=int,
        default=8,
        help="Upper bound on max_tokens in requests (default 8).",
    )
    add("--budget-requests", type=int, default=500, help="Most requests in the run (default 500).")
    add(
        "--budget-tokens",
        type=int,
        default=100_000,
        help="Most tokens (as the target reports them) in the run (default 100000).",
    )
    add(
        "--vocab-size",
        type=int,
        default=1000,
        help="Token ids in token prompts are drawn below this (default 1000).",
    )
    add("--seed", type=int, default=0, help="Seed of request generation (default 0).")
    # pytest-timeout owns --timeout, so the per-request bound has a longer name.
    add(
        "--request-timeout",
        type=float,
        default=30.0,
        help="Seconds to wait for the first byte of an answer (default 30).",
    )
    add(
        "--stream-gap",
        type=float,
        default=15.0,
        help="Most seconds between two reads of a response (default 15).",
    )
    add(
        "--stream-total",
        type=float,
        default=120.0,
        help="Most seconds for one response (default 120).",
    )
    add(
        "--max-body-bytes",
        type=int,
        default=16 * 1024 * 1024,
        help="Most bytes read from one response (default 16 MiB).",
    )
    add(
        "--rps",
        type=float,
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
    for arg in config.args:
        path = arg.split("::", 1)[0]
        if path == "conformance" or path.startswith("conformance."):
            return True
        resolved = Path(config.invocation_params.dir, path).resolve()
        if resolved == SUITE_DIR or SUITE_DIR in resolved.parents:
            return True
    return False


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _headers(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, rest = value.partition(":")
        if not sep or not name.strip():
            raise pytest.UsageError(f"--header {value!r}: expected 'Name: value'")
        out[name.strip()] = rest.strip()
    return out


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a test of the conformance suite")
    if not suite_requested(config):
        return
    opt = config.option
    try:
        spec = load_spec(opt.spec, strict=opt.strict_spec)
    except SpecError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None
    load_checks()
    try:
        checks, skip = _csv(opt.checks), _csv(opt.skip_checks)
        unknown = (set(checks) | set(skip)) - set(REGISTRY)
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
    except KeyError as exc:
        raise pytest.UsageError(f"conformance: unknown requirement ID(s): {exc.args[0]}") from None
    baseline = _load_baseline(opt.baseline) if opt.baseline else None
    if baseline is not None:
        config.stash[BASELINE_KEY] = baseline
    if opt.shard:
        _parse_shard(opt.shard)
    api_key = opt.api_key or os.environ.get(API_KEY_ENV) or None
    if opt.target_url and not opt.model:
        raise pytest.UsageError("conformance: --model is required with --target-url")
    settings = Settings(
        model=opt.model or "reference-model",
        max_examples=opt.max_examples,
        max_tokens=opt.max_tokens,
        vocab_size=opt.vocab_size,
        seed=opt.seed,
        strict=opt.strict_should,
        # The preflight request to an external target comes out of the budget too.
        budget_requests=opt.budget_requests - (1 if opt.target_url else 0),
        budget_tokens=opt.budget_tokens,
        checks=checks,
        skip_checks=skip,
        known_failures=frozenset(t.id for t in baseline.tallies.values() if t.failed)
        if baseline
        else frozenset(),
    )
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    target = opt.target_url
    reference = None
    if not target:
        # The embedded default: the reference target of the spec's flavour, with a key of
        # its own so that the auth requirements are exercised too.
        from conformance.reference import ReferenceServer

        api_key = "sk-reference-" + secrets.token_hex(12)
        flavor = spec.name if spec.name in BUILTIN_SPECS else "aihubmix"
        reference = ReferenceServer(flavor, api_key=api_key, models=(settings.model,))
        target = reference.start()
        config.add_cleanup(reference.stop)
    client = Client(
        base_url=target,
        api_key=api_key,
        media_type=spec.request_media_type,
        extra_headers=_headers(opt.header),
        limits=Limits(
            ttfb=opt.request_timeout,
            gap=opt.stream_gap,
            total=opt.stream_total,
            max_bytes=opt.max_body_bytes,
        ),
        retry=RetryPolicy(),
        pacer=Pacer(opt.rps / workers if opt.rps else None),
    )
    config.add_cleanup(client.close)
    run = Run(settings, spec, client, workers=workers)
    config.stash[RUN_KEY] = run
    results = Results.for_requirements(run.requirements)
    results.meta.update(
        target=target if opt.target_url else "embedded reference target",
        spec=spec.name,
        spec_title=f"{spec.title} {spec.version}".strip(),
        strict_spec=spec.strict,
        strict=settings.strict,
        suite_version=__version__,
        errata=[{"id": e.id, "title": e.title, "detail": e.detail} for e in spec.errata],
        model=settings.model,
        seed=settings.seed,
        started=time.time(),
    )
    config.stash[RESULTS_KEY] = results
    if opt.target_url and not hasattr(config, "workerinput"):
        first = _preflight(run, has_key=api_key is not None)
        results.spent["requests"] += 1 + first.retries
        results.spent["retries"] += first.retries
        results.meta[OBSERVED] = {str(first.status): 1}
        if first.status == 429:
            # Rate limited already, after the retries: this process's items send nothing.
            run.rate_limited = True
            results.meta["no_verdict"] = no_verdict_reason(run.client.retry)


def _preflight(run: Run, *, has_key: bool) -> Exchange:
    """One cheap request: is the target there, and does it take our credentials?"""
    from conformance.case import Case

    case = Case(
        {"model": run.settings.model, "prompt": "Say hi", "max_tokens": 1}, label="preflight"
    )
    exchange = run.client.send(case)
    if exchange.transport_error and exchange.status is None:
        raise pytest.UsageError(f"conformance: {exchange.transport_error}")
    if exchange.status == 401:
        if has_key:
            raise pytest.UsageError("conformance: the target rejected the API key (401)")
        raise pytest.UsageError(
            f"conformance: the target demands an API key (401): pass --api-key or set {API_KEY_ENV}"
        )
    return exchange


def _load_baseline(path: str) -> Results:
    from reports.compare import InputError, load_results

    try:
        return load_results(Path(path))
    except InputError as exc:
        raise pytest.UsageError(f"conformance: --baseline {exc}") from None


def _parse_shard(value: str) -> tuple[int, int]:
    k, sep, n = value.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise pytest.UsageError(f"conformance: --shard {value!r}: expected K/N with 1 <= K <= N")
    return int(k), int(n)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only this shard's slice of the suite (every N-th item, in collection order)."""
    if not config.option.shard or RUN_KEY not in config.stash:
        return
    k, n = _parse_shard(config.option.shard)
    keep = [item for i, item in enumerate(items) if i % n == k - 1]
    dropped = [item for i, item in enumerate(items) if i % n != k - 1]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep
    config.stash[RESULTS_KEY].meta["shard"] = config.option.shard


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return None
    results = config.stash[RESULTS_KEY]
    lines = [
        f"conformance: target {results.meta['target']}, spec {run.spec.name} "
        f"({results.meta['spec_title']}), model {run.settings.model}",
    ]
    if run.spec.errata:
        lines.append("conformance: errata applied: " + ", ".join(e.id for e in run.spec.errata))
    else:
        lines.append(
            "conformance: no errata applied" + (" (--strict-spec)" if run.spec.strict else "")
        )
    return lines


@pytest.fixture
def conformance(request: pytest.FixtureRequest) -> Iterator[ItemRun]:
    """The run, seen from one suite test: send cases, then call ``verdict()``."""
    run = request.config.stash.get(RUN_KEY, None)
    if run is None:
        pytest.skip("the conformance suite runs only when its tests are selected")
    item_run = run.item()
    request.node.stash[ITEM_KEY] = item_run
    yield item_run


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    item_run = item.stash.get(ITEM_KEY, None)
    if item_run is not None and call.when == "teardown":
        # Travels with the report (also across pytest-xdist) to the controller.
        report.conformance_results = json.dumps(item_run.results.to_json())
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    payload = getattr(report, "conformance_results", None)
    if payload is None:
        return
    config = _config_of(report)
    if config is not None and RESULTS_KEY in config.stash:
        incoming = Results.from_json(json.loads(payload))
        config.stash[RESULTS_KEY].merge(incoming)


_CONFIG: list[pytest.Config] = []


def _config_of(_: pytest.TestReport) -> pytest.Config | None:
    return _CONFIG[-1] if _CONFIG else None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG.append(session.config)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _CONFIG and _CONFIG[-1] is config:
        _CONFIG.pop()
    if RESULTS_KEY not in config.stash or hasattr(config, "workerinput"):
        return
    if config.option.collectonly:
        return
    results = config.stash[RESULTS_KEY]
    results.meta["wall_time"] = round(time.time() - results.meta["started"], 3)
    run = config.stash[RUN_KEY]
    no_verdict = results.meta.get("no_verdict")
    if no_verdict and not results.failing(strict=run.settings.strict):
        # A worker's item was rate limited: the controller, not the worker, ends the
        # run, so that this works the same with and without pytest-xdist.
        session.exitstatus = exitstatus = EXIT_NO_VERDICT
    baseline = config.stash.get(BASELINE_KEY, None)
    if baseline is not None:
        from reports.baseline import compare_to_baseline

        diff = compare_to_baseline(results, baseline)
        results.meta["baseline"] = diff.to_json() | {"file": config.option.baseline}
    results.meta["verdict"] = verdict(
        results, exitstatus, strict=run.settings.strict, known=run.settings.known_failures
    )
    from reports import write_all

    report_dir = Path(config.invocation_params.dir, config.option.report_dir)
    written = write_all(results, report_dir)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        spent = results.spent
        reporter.write_sep("-", "conformance")
        why = f" ({no_verdict})" if results.meta["verdict"] == "no-verdict" and no_verdict else ""
        reporter.write_line(
            f"verdict: {results.meta['verdict']}{why}; spent {int(spent['requests'])} requests, "
            f"{int(spent['tokens'])} tokens, {int(spent['retries'])} retries; "
            f"{results.meta['wall_time']:.1f} s"
        )
        reporter.write_line(status_summary(results, run.spec))
        if "baseline" in results.meta:
            b = results.meta["baseline"]
            reporter.write_line(
                f"baseline: {len(b['known'])} known ({', '.join(b['known']) or '-'}), "
                f"{len(b['new'])} new ({', '.join(b['new']) or '-'}), "
                f"{len(b['fixed'])} fixed ({', '.join(b['fixed']) or '-'})"
            )
        for path in written:
            reporter.write_line(f"report: {path}")


def verdict(
    results: Results, exitstatus: int, *, strict: bool, known: frozenset[str] = frozenset()
) -> str:
    """The run's one-word verdict, from its findings and pytest's exit status."""
    if results.failing(strict=strict, known=known):
        return "failed"
    if exitstatus == EXIT_NO_VERDICT:
        return "no-verdict"
    if exitstatus != pytest.ExitCode.OK:
        return "error"  # a suite test broke, collection failed, or the run was interrupted
    return "passed" if results.spent["requests"] else "not-run"
