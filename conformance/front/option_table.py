"""THE table of options: every option of every front door, declared once (issue 35).

Each :class:`Option` says its name, type (or choices), default, help, help group, the
front doors that take it and what results.json records of it. Every parser is generated
from :data:`OPTIONS`: the pytest plugin's options (conformance/front/options.py), the help
page and checker of ``completions-conformance [run]`` (conformance/front/cli.py), and the
argparse parsers of ``judge`` (traffic_cli.py), ``proxy`` (proxy.py) and ``gate``
(gate.py). ``gate`` takes its own options and hands every other word to its shards.

What a run records (:func:`recorded`, results.json ``meta.options``): every option that
changes what the suite sends (``sent``) or how the answers are judged and the verdict
decided (``judged``), by option name, with the value the run used; ``--baseline`` warns
when its run used another (conformance/reports/baseline.py). The run's identity (``--spec``,
``--model``, ``--target-url``) has a ``meta`` field of its own, which the baseline check
compares itself (another spec is refused, another model or target is a warning).

Light: the plugin imports it in every pytest process; it imports no spec, no engine.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conformance.front.arguments import INTEGER, NUMBER, one_of
from conformance.judging.document.contract import CONTRACT_HELP, DEFAULT_CONTRACT, Contract
from conformance.judging.document.policies import strict_help
from conformance.judging.verdict.recorded_options import JUDGED, KINDS, SENT

if TYPE_CHECKING:
    from conformance.run.session import Setup

# -- the front doors ---------------------------------------------------------------------
PYTEST = "pytest"  # the plugin: pytest conformance
RUN = "run"  # completions-conformance [run]: pytest behind it, the same options
JUDGE = "judge"  # completions-conformance judge FILE...
PROXY = "proxy"  # completions-conformance proxy
GATE = "gate"  # completions-conformance gate (every other option goes to its shards)
MERGE = "merge"  # conformance-merge RESULTS.json... (the shards' reports, one verdict)
DOORS = (PYTEST, RUN, JUDGE, PROXY, GATE, MERGE)
#: A suite run's doors: the plugin and the command line in front of it.
SUITE = frozenset({PYTEST, RUN})
#: The doors that judge traffic the suite did not send.
TRAFFIC = frozenset({JUDGE, PROXY})
#: Doors whose parser never refuses a value itself: the plugin names the option and what
#: it expects in one line (conformance/front/arguments.py), where argparse would print
#: pytest's usage text.
LENIENT = frozenset({PYTEST, RUN})

# -- what results.json records of an option ----------------------------------------------
# SENT: meta.options.sent[flag], it changes which requests are sent; JUDGED:
# meta.options.judged[flag], it changes how answers are judged or the verdict decided.
IDENTITY = "identity"  # a meta field of its own (``at``), compared by the baseline check
RECORDED = KINDS

# -- the help groups, in the order a new user needs them -----------------------------------
TARGET = "target: what is tested"
SELECTION = "selection: which requirements, how hard"
SPENDING = "spending and bounds"
REPORTS = "reports and CI"
FORWARDING = "proxy: what is forwarded and judged"
SHARDS = "gate: shards and the CI job"
GROUPS = (TARGET, SELECTION, SPENDING, REPORTS, FORWARDING, SHARDS)

API_KEY_ENV = "CONFORMANCE_API_KEY"
BUILTIN = ("aihubmix", "nscale", "openai")  # spec.BUILTIN_SPECS, without importing the spec model
DEFAULT_CONCURRENCY = 16
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_HELD_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Option:
    """One option, as every door that takes it reads it."""

    flag: str
    help: str
    group: str
    doors: frozenset[str]
    #: bool: a switch (store_true); list: repeatable (append); int, float, str: one value.
    kind: type = str
    default: Any = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    required: bool = False
    #: SENT, JUDGED, IDENTITY, or None: it changes neither what is sent nor how it is
    #: judged (where reports go, the key, pacing, concurrency, the shard).
    records: str | None = None
    #: SENT, JUDGED: the Setup attribute it sets (``settings.max_tokens``), read into
    #: ``meta.options``; IDENTITY: the ``meta`` field that records it.
    at: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def argument(self, door: str, *, defaults: bool = True) -> dict[str, Any]:
        """``add_argument``'s keywords for this option at ``door`` (pytest's ``addoption``
        takes the same)."""
        attrs: dict[str, Any] = {"help": self.help.replace("%", "%%")}
        lenient = door in LENIENT
        if self.kind is bool:
            attrs["action"] = "store_true"
            return attrs
        if self.kind is list:
            attrs["action"] = "append"
            if defaults:
                attrs["default"] = list(self.default or ())
        elif self.choices:
            if lenient:
                attrs["type"] = one_of(*self.choices)
            else:
                attrs["choices"] = list(self.choices)
        elif self.kind is int:
            attrs["type"] = INTEGER if lenient else int
        elif self.kind is float:
            attrs["type"] = NUMBER if lenient else float
        if defaults and self.kind is not list and self.default is not None:
            attrs["default"] = self.default
        if self.metavar is not None:
            attrs["metavar"] = self.metavar
        if self.required:
            attrs["required"] = True
        return attrs


def _contract_help() -> str:
    return (
        "How the document binds the target: "
        + "; ".join(f"{c.value}: {CONTRACT_HELP[c]}" for c in Contract)
        + f" (default: {DEFAULT_CONTRACT.value})."
    )


OPTIONS: tuple[Option, ...] = (
    # -- target: what is tested ------------------------------------------------------------
    Option(
        "--target-url",
        "Base URL of the target (the spec's path is appended; a trailing /v1 is accepted and "
        "reported). Default: start the embedded reference target.",
        TARGET,
        SUITE,
        metavar="URL",
        records=IDENTITY,
        at="target",
    ),
    Option(
        "--model",
        "Model name sent in every request (default with the embedded target: "
        "reference-model, the only model it serves).",
        TARGET,
        SUITE,
        metavar="NAME",
        records=IDENTITY,
        at="model",
    ),
    Option(
        "--api-key",
        f"API key sent as a bearer token (default: ${API_KEY_ENV}).",
        TARGET,
        SUITE,
        metavar="KEY",
    ),
    Option(
        "--spec",
        f"{' | '.join(BUILTIN)} | PATH or http(s) URL of an OpenAPI document | target (with "
        "--target-url: the target's own /openapi.json, then /v1/openapi.json) (default: "
        "aihubmix).",
        TARGET,
        SUITE | TRAFFIC,
        default="aihubmix",
        metavar="NAME|PATH",
        records=IDENTITY,
        at="spec",
    ),
    Option(
        "--header",
        "Extra request header (repeatable); its value is redacted in every output.",
        TARGET,
        SUITE,
        kind=list,
        default=(),
        metavar="'Name: value'",
    ),
    # -- selection: which requirements, how hard ----------------------------------------------
    Option(
        "--checks",
        "Comma-separated requirement IDs to run (default all).",
        SELECTION,
        SUITE,
        default="",
        metavar="IDS",
        records=JUDGED,
        at="settings.checks",
    ),
    Option(
        "--skip-checks",
        "Comma-separated requirement IDs to skip.",
        SELECTION,
        SUITE,
        default="",
        metavar="IDS",
        records=JUDGED,
        at="settings.skip_checks",
    ),
    Option(
        "--require-capabilities",
        "Comma-separated capabilities (e.g. echo,logprobs) the target must offer: one "
        "declined or ignored fails the run.",
        SELECTION,
        SUITE,
        default="",
        metavar="LIST",
        records=JUDGED,
        at="settings.require_capabilities",
    ),
    # pytest owns --strict, so the level switch has a longer name.
    Option(
        "--strict-should",
        "SHOULD findings fail the run too.",
        SELECTION,
        SUITE,
        kind=bool,
        records=JUDGED,
        at="settings.strict",
    ),
    Option(
        "--strict-spec",
        strict_help(),
        SELECTION,
        SUITE | TRAFFIC,
        kind=bool,
        records=JUDGED,
        at="strict_spec",
    ),
    Option(
        "--contract",
        _contract_help(),
        SELECTION,
        SUITE | TRAFFIC,
        default=DEFAULT_CONTRACT.value,
        choices=tuple(c.value for c in Contract),
        metavar="|".join(c.value for c in Contract),
        records=JUDGED,
        at="contract",
    ),
    Option(
        "--max-examples",
        "Generated requests per generated test (default 10: tokens cost money).",
        SELECTION,
        SUITE,
        kind=int,
        default=10,
        metavar="N",
        records=SENT,
        at="settings.max_examples",
    ),
    Option(
        "--max-tokens",
        "Upper bound on max_tokens (default 8).",
        SELECTION,
        SUITE,
        kind=int,
        default=8,
        metavar="N",
        records=SENT,
        at="settings.max_tokens",
    ),
    Option(
        "--seed",
        "Seed of request generation (default 0).",
        SELECTION,
        SUITE,
        kind=int,
        default=0,
        metavar="N",
        records=SENT,
        at="settings.seed",
    ),
    Option(
        "--fuzz",
        "Also send N requests drawn from schemathesis's own generation (positive, negative "
        "and coverage phases), judged by the same requirements: a deep, nightly scenario "
        "(needs the [fuzz] extra; default 0: off).",
        SELECTION,
        SUITE,
        kind=int,
        default=0,
        metavar="N",
        records=SENT,
        at="settings.fuzz",
    ),
    Option(
        "--vocab-size",
        "Token ids in token prompts are drawn below this (default 1000).",
        SELECTION,
        SUITE,
        kind=int,
        default=1000,
        metavar="N",
        records=SENT,
        at="settings.vocab_size",
    ),
    # -- spending and bounds --------------------------------------------------------------
    Option(
        "--budget-requests",
        "Most requests in the run (default 500).",
        SPENDING,
        SUITE,
        kind=int,
        default=500,
        metavar="N",
        records=SENT,
        at="settings.budget_requests",
    ),
    Option(
        "--budget-tokens",
        "Most tokens (as the target reports them) in the run (default 100000).",
        SPENDING,
        SUITE,
        kind=int,
        default=100_000,
        metavar="N",
        records=SENT,
        at="settings.budget_tokens",
    ),
    Option(
        "--rps",
        "Most requests per second, summed over xdist workers (default: unpaced).",
        SPENDING,
        SUITE,
        kind=float,
        metavar="R",
    ),
    Option(
        "--concurrency",
        f"Requests in flight at once per process for independent requests (default "
        f"{DEFAULT_CONCURRENCY}: real endpoints answer in 0.3-3 s; a default run's ~155 "
        "requests at 16 in flight take ~15 s against a 1 s endpoint, and the client halves "
        "its limit on every 429, so a rate-limited key is not hammered; 1 sends one after "
        "another).",
        SPENDING,
        SUITE,
        kind=int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
    ),
    # pytest-timeout owns --timeout, so the per-request bound has a longer name.
    Option(
        "--request-timeout",
        "Seconds to wait for the first byte of an answer (default 30).",
        SPENDING,
        SUITE,
        kind=float,
        default=30.0,
        metavar="S",
        records=JUDGED,
        at="limits.ttfb",
    ),
    Option(
        "--stream-gap",
        "Most seconds between two reads of a response (default 15).",
        SPENDING,
        SUITE,
        kind=float,
        default=15.0,
        metavar="S",
        records=JUDGED,
        at="limits.gap",
    ),
    Option(
        "--stream-total",
        "Most seconds for one response (default 120).",
        SPENDING,
        SUITE,
        kind=float,
        default=120.0,
        metavar="S",
        records=JUDGED,
        at="limits.total",
    ),
    Option(
        "--max-body-bytes",
        "Most bytes read from one response (default 16 MiB); the proxy forwards a larger "
        "answer but does not judge it.",
        SPENDING,
        SUITE | {PROXY},
        kind=int,
        default=MAX_BODY_BYTES,
        metavar="N",
        records=JUDGED,
        at="limits.max_bytes",
    ),
    # -- reports and CI -------------------------------------------------------------------
    Option(
        "--report-dir",
        "Where the reports are written (default reports/out).",
        REPORTS,
        SUITE | TRAFFIC | {GATE, MERGE},
        default="reports/out",
        metavar="DIR",
    ),
    Option(
        "--baseline",
        "results.json of an earlier run: requirements failing there are reported as known "
        "and do not fail this run; new failures do; fixed ones are listed.",
        REPORTS,
        SUITE | {GATE, MERGE},
        metavar="FILE",
    ),
    Option(
        "--shard",
        "Run only the K-th of N deterministic slices of the suite (1-based), to split a run "
        "across CI jobs; merge their results.json with conformance-merge.",
        REPORTS,
        SUITE,
        metavar="K/N",
    ),
    # -- the proxy's own ----------------------------------------------------------------
    Option(
        "--upstream",
        "Where requests go.",
        FORWARDING,
        frozenset({PROXY}),
        metavar="URL",
        required=True,
    ),
    Option(
        "--listen",
        "Where clients connect (default 127.0.0.1:8080).",
        FORWARDING,
        frozenset({PROXY}),
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
    ),
    Option(
        "--sample",
        "Share of the operation's requests judged, 0..1 (default 1).",
        FORWARDING,
        frozenset({PROXY}),
        kind=float,
        default=1.0,
        metavar="RATE",
    ),
    Option(
        "--har",
        "Also write the judged exchanges as HAR 1.2.",
        FORWARDING,
        frozenset({PROXY}),
        metavar="FILE",
    ),
    Option(
        "--max-held-bytes",
        "Most bytes of answers held for the judge at once (default 256 MiB).",
        FORWARDING,
        frozenset({PROXY}),
        kind=int,
        default=MAX_HELD_BYTES,
        metavar="N",
    ),
    # -- the gate's own -------------------------------------------------------------------
    Option(
        "--shards",
        "Processes at once, each running one slice (default 1).",
        SHARDS,
        frozenset({GATE}),
        kind=int,
        default=1,
        metavar="N",
    ),
    Option(
        "--args",
        "Further options as one string, split as a shell splits a command line: quotes "
        "respected, nothing expanded (the Action's args input).",
        SHARDS,
        frozenset({GATE}),
        default="",
        metavar="TEXT",
    ),
    Option(
        "--summary",
        "Markdown file the summary is appended to (default $GITHUB_STEP_SUMMARY).",
        SHARDS,
        frozenset({GATE}),
        metavar="FILE",
    ),
    Option(
        "--output",
        "File verdict=, exit-code=, report-dir= are appended to (default $GITHUB_OUTPUT).",
        SHARDS,
        frozenset({GATE}),
        metavar="FILE",
    ),
)

BY_FLAG = {option.flag: option for option in OPTIONS}


def of(door: str) -> Iterator[Option]:
    """The options ``door`` takes, in the table's order."""
    return (option for option in OPTIONS if door in option.doors)


def add_arguments(
    parser: argparse.ArgumentParser,
    door: str,
    *,
    defaults: bool = True,
    first: tuple[str, ...] = (),
) -> None:
    """Add ``door``'s options to ``parser``, each in its help group: ``first`` (the door's
    own), then GROUPS' order. ``defaults=False`` leaves every default out (a checker of the
    line, which must not fill in what was not given)."""
    for title in (*first, *(g for g in GROUPS if g not in first)):
        mine = [option for option in of(door) if option.group == title]
        if mine:
            group = parser.add_argument_group(title)
            for option in mine:
                group.add_argument(option.flag, **option.argument(door, defaults=defaults))


def _json(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list | frozenset):
        return [_json(v) for v in value]
    return value


def value_at(setup: Setup, path: str) -> Any:
    """The Setup's value at a dotted attribute path (``settings.max_tokens``)."""
    value: Any = setup
    for name in path.split("."):
        value = getattr(value, name)
    return _json(value)


def recorded(setup: Setup) -> dict[str, dict[str, Any]]:
    """results.json ``meta.options``: every option that changes what is sent or how it is
    judged, by kind (``sent``, ``judged``) and option name, with the value ``setup`` holds."""
    out: dict[str, dict[str, Any]] = {kind: {} for kind in RECORDED}
    for option in OPTIONS:
        if option.records in RECORDED and option.at:
            out[option.records][option.flag] = value_at(setup, option.at)
    return out
