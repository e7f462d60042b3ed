"""The suite's scenarios, runner-agnostic: what each one sends and in which order.

A scenario either lists independent ``cases`` (the engine sends them up to
``--concurrency`` at once, prefetched across items, judged in case order) or has a
``body`` that sends in order because a request depends on an earlier answer (the stop
probe, the seed probe's twin). A body is a chain on the run's critical path against a slow
target: the engine starts it first (``Run.plan``), and a body keeps its chain short by
sending at once whatever does not wait for an answer. Every hand-written request body goes through
:func:`case`, the one place where request construction can be swapped for the spec-driven
constructor. The pytest suite (conformance/test_*.py) plays one scenario per test
function named ``test_<scenario name>``; ``engine.execute`` plays them without pytest.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conformance.judging.document.spec import Spec
from conformance.judging.verdict.record import SkipCause
from conformance.judging.wire.case import Case, Mode, repeated
from conformance.judging.wire.exchange import Exchange
from conformance.run.ahead import BATCHES
from conformance.run.session import ScenarioSkipped

if TYPE_CHECKING:
    from conformance.run.item import ItemRun
    from conformance.run.session import RunState, Sender, Sent, Settings

BATCH_PARAMS = tuple(range(BATCHES))
BATCH_IDS = tuple(f"batch{b + 1}of{BATCHES}" for b in range(BATCHES))


@dataclass(frozen=True, slots=True)
class Scenario:
    """One kind of suite test; ``params`` makes one item each (``ids`` names them)."""

    name: str
    cases: Callable[[RunState, Any], list[Case]] | None = None
    body: Callable[[ItemRun, Any], None] | None = None
    params: tuple[Any, ...] = (None,)
    ids: tuple[str, ...] = ()
    via: Sender | None = None
    #: Its cases cost CPU to build (drawn by Hypothesis or schemathesis, or the openai
    #: import they start): planned after the others, so that the first requests go out
    #: while these are built (Run.plan).
    costly: bool = False

    def item_id(self, param: Any) -> str:
        if self.ids:
            return f"{self.name}[{self.ids[self.params.index(param)]}]"
        return self.name


def case(
    spec: Spec,
    body: dict[str, Any],
    *,
    mode: Mode = "probe",
    label: str,
    tags: frozenset[str] = frozenset(),
    breaks: str | None = None,
) -> Case:
    """The one constructor of hand-written scenario requests.

    ``conformance.strategies.build_case`` validates the body against the spec (openapi-core and the
    cross-field rules the document states) and adapts it to the nearest valid values, or
    raises CaseSkipped: turned here into ScenarioSkipped, so the skip and its reason reach
    the reports instead of an invalid "valid" request reaching the target.
    """
    from conformance.strategies import CaseSkipped, build_case

    try:
        return build_case(spec, body, mode=mode, label=label, tags=tags, breaks=breaks)
    except CaseSkipped as exc:
        raise ScenarioSkipped(f"{label}: {exc}", (), SkipCause.NOT_DECLARED) from None


def checked_probe(spec: Spec, probe: Case) -> Case:
    """A hand-written invalid probe (auth, unknown model, 400) through the one constructor:
    a rule it names is checked to be the only one it breaks, and the rest of its body is
    moved to valid values under the spec (a copy may allow 5 characters of prompt)."""
    from conformance.judging.document.oracle import RULE_NAME
    from conformance.strategies import CaseSkipped, build_case

    body = probe.body
    try:
        if probe.raw_body is None and probe.breaks and RULE_NAME.match(probe.breaks):
            field = probe.breaks.split(":", 1)[0]
            rest = {k: v for k, v in body.items() if k != field}
            body = {
                **build_case(spec, rest, mode="probe", label=probe.label).body,
                field: body[field],
            }
        return build_case(
            spec,
            body,
            mode=probe.mode,
            label=probe.label,
            tags=probe.tags,
            breaks=probe.breaks,
            auth=probe.auth,
            raw_body=probe.raw_body,
        )
    except CaseSkipped as exc:
        raise ScenarioSkipped(f"{probe.label}: {exc}", (), SkipCause.NOT_DECLARED) from None


def _described(spec: Spec, body: dict[str, Any]) -> Case:
    from conformance.strategies import describe, request_tags

    return case(spec, body, mode="valid", label=describe(body), tags=request_tags(body))


# -- generated requests --------------------------------------------------------------------

#: The request budget from which the edge requests whose answers may vary are sent
#: more than once (case.SENDS times).
REPEAT_BUDGET = 300


def _valid(run: RunState, batch: int, *, stream: bool = False) -> list[Case]:
    from conformance.run.ahead import valid_part

    return valid_part(run, batch, stream=stream)  # drawn once per run (ahead.py)


def _edges(run: RunState, batch: int) -> list[Case]:
    from conformance.run.ahead import edge_list

    cases = edge_list(run)[batch::BATCHES]  # built once per run (ahead.py), sliced per batch
    # Sent again where the budget allows (the default's does, 3x over): see case.repeated.
    return repeated(cases) if run.settings.budget_requests >= REPEAT_BUDGET else cases


def _invalid(run: RunState, batch: int) -> list[Case]:
    """One request per rule the spec states: cheap, since each must be rejected unserved."""
    from conformance.run.ahead import invalid_list

    return invalid_list(run)[batch::BATCHES]  # built once per run (ahead.py), sliced per batch


# -- probes --------------------------------------------------------------------------------


def _auth(run: RunState, _: Any) -> list[Case]:
    """No credentials, a malformed header and a wrong key are each answered 401."""
    from conformance.judging.checks.errors import auth_probes

    covers = ("AUTH-REQUIRED",)
    if not run.spec.bearer_auth:
        raise ScenarioSkipped("the spec declares no bearer auth", covers, SkipCause.NOT_DECLARED)
    if not run.client.api_key:
        # Without a key of our own the target may well be open: a 200 proves nothing.
        reason = "no API key configured (--api-key): auth is not probed"
        raise ScenarioSkipped(reason, covers, SkipCause.NO_KEY)
    return [checked_probe(run.spec, probe) for probe in auth_probes(run.settings.model)]


def _unknown_model(run: RunState, _: Any) -> list[Case]:
    """A model the target does not serve is answered 404 in the error envelope."""
    from conformance.judging.checks.errors import unknown_model_probe

    return [checked_probe(run.spec, unknown_model_probe())]


def _bad_requests(run: RunState, _: Any) -> list[Case]:
    """A body that is not JSON and a wrongly typed field are answered 400."""
    from conformance.judging.checks.errors import bad_request_probes

    return [checked_probe(run.spec, p) for p in bad_request_probes(run.spec, run.settings.model)]


def _greedy(settings: Settings, prompt: str) -> dict[str, Any]:
    """A request that two sends answer alike (temperature 0, a seed), long enough to compare."""
    return {
        "model": settings.model,
        "prompt": prompt,
        "max_tokens": max(settings.max_tokens, 8),
        "temperature": 0,
        "seed": 7,
    }


#: The prompts the stop probe tries, in order, until one answer has words to pick from: a
#: tiny or random model may answer one word, or bytes, to the first.
STOP_PROBE_PROMPTS = (
    "Count slowly from one to twenty:",
    "Write two sentences about the sea.",
    "List ten colours, separated by spaces:",
)


def _stop_probe(item: ItemRun, _: Any) -> None:
    """Ask once at temperature 0, then again with stop sequences taken from the first
    answer: one of its words, and a piece across a word boundary (the end of one word and
    the start of the next), which spans two tokens on every tokenizer that splits at
    whitespace: a server that matches stop sequences only inside one token misses it. Each
    is sent streamed too; all go out at once: two latencies in a row, not three. An answer
    too short to pick from is legal: the next prompt is tried, and after the last the
    probe says why it could not run (a stated reason)."""
    from conformance.judging.checks.semantics import STOP_PROBE_TAG

    spec = item.spec
    for prompt in STOP_PROBE_PROMPTS:
        body = _greedy(item.settings, prompt)
        first = item.send(case(spec, body, label="stop probe: first answer"))
        text = first_text(first.json if first else None) or ""
        # U+FFFD stands for bytes that are not UTF-8: no server can match it as a stop.
        words = [w for w in re.findall(r"\S+", text) if "\ufffd" not in w]
        if len(words) >= 2:
            break
        if first is None or first.status != 200:
            # No answer, or a refusal: not a short answer (other requirements judge it).
            raise ScenarioSkipped(
                "the first answer was no completion to pick a stop sequence from",
                ("STOP-PROBE",),
                SkipCause.TARGET,
            )
    else:
        raise ScenarioSkipped(
            f"the target's answers to {len(STOP_PROBE_PROMPTS)} prompts each had fewer than "
            "two words to pick a stop sequence from",
            ("STOP-PROBE",),
            SkipCause.SHORT_ANSWER,
        )
    picks = [(words[len(words) // 2], "")]
    across = across_words(text)
    if across is not None:
        picks.append((across, " (across a word boundary)"))
    tags = frozenset({STOP_PROBE_TAG})
    cases: list[tuple[Case, tuple[Exchange, ...]]] = []
    skipped: ScenarioSkipped | None = None
    for stop, how in picks:
        second = case(
            spec, {**body, "stop": [stop]}, label=f"stop probe: stop={stop!r}{how}", tags=tags
        )
        cases.append((second, (first,) if first else ()))
        # The same stop, streamed: a stream must honour stop sequences too, and keep no
        # head of one (judged against the same first answer).
        label = f"stop probe, streamed: stop={stop!r}{how}"
        try:
            streamed = case(spec, {**second.body, "stream": True}, label=label, tags=tags)
            cases.append((streamed, (first,) if first else ()))
        except ScenarioSkipped as exc:
            skipped = exc
    sends = [(item.dispatch(c), related) for c, related in cases]
    for sent, related in sends:
        item.receive(sent, related=related)
    if skipped is not None:
        raise skipped


def across_words(text: str) -> str | None:
    """Up to two characters before a whitespace run in ``text``, the run and up to two
    after it, at the boundary nearest the middle; None without a boundary to take."""
    pieces = [
        text[max(a.start(), a.end() - 2) : min(b.end(), b.start() + 2)]
        for a, b in itertools.pairwise(re.finditer(r"\S+", text))
    ]
    pieces = [p for p in pieces if "\ufffd" not in p]
    return pieces[len(pieces) // 2] if pieces else None


#: The longest prompt the context window probe sends (a window above it is not probed):
#: a token-id prompt this long is about 1 MB of JSON.
MAX_WINDOW_PROBE = 262_144
WINDOW_COVERS = ("CONTEXT-WINDOW-REJECTED",)


def _context_window(item: ItemRun, _: Any) -> None:
    """Read the context window the target advertises (GET /v1/models), then send a prompt
    one token over it: as token ids where the target serves a short token-id prompt (its
    length is then exact), else as text. Refused, it costs nothing; served, it costs the
    window, so it is sent only within the token budget and MAX_WINDOW_PROBE."""
    from conformance.judging.checks.window import TOKEN_ID, advertised_window, over_window_probe

    spec, model = item.spec, item.settings.model
    listing = _models_listing(item)
    window, why = advertised_window(listing.json, model)
    if listing.status is None or listing.status == 429 or listing.status >= 500:
        cause = SkipCause.RATE_LIMITED if listing.status == 429 else SkipCause.TARGET
        said = listing.transport_error or f"answered {listing.status}"
        raise ScenarioSkipped(f"GET {listing.url} {said}", WINDOW_COVERS, cause)
    if window is None:
        said = why if listing.status == 200 else f"answered {listing.status}"
        reason = f"the target advertises no context window: GET {listing.url} {said}"
        raise ScenarioSkipped(reason, WINDOW_COVERS, SkipCause.NOT_DECLARED)
    # A conformant target refuses the probe and bills nothing; one that serves it bills the
    # whole window. A window the run may not spend is a stated reason (COST), said before
    # anything is sent, so a 128k model is not "incomplete" under the default budget.
    budget = item.settings.budget_tokens
    if window + 1 > min(budget, MAX_WINDOW_PROBE):
        bound = (
            f"--budget-tokens {budget} (raise it above {window} to probe)"
            if window + 1 > budget
            else f"the suite's bound on one probe ({MAX_WINDOW_PROBE} tokens)"
        )
        reason = (
            f"not probed: a prompt over the advertised {window}-token context window could "
            f"cost more than {bound}"
        )
        raise ScenarioSkipped(reason, WINDOW_COVERS, SkipCause.COST)
    if window + 1 > item.run.budget.tokens:
        reason = f"the token budget left ({item.run.budget.tokens}) is below the window"
        raise ScenarioSkipped(reason, WINDOW_COVERS, SkipCause.BUDGET)
    control = {"model": model, "prompt": [TOKEN_ID] * 3, "max_tokens": 1, "temperature": 0}
    token_ids = False
    if spec.validate("request", control) is None:
        label = "context window probe: a short token-id prompt (are token ids served?)"
        served = item.send(case(spec, control, label=label))
        token_ids = served is not None and served.status == 200
    wanted = over_window_probe(model, window, token_ids=token_ids)
    probe = checked_probe(spec, wanted)
    if probe.body.get("prompt") != wanted.body["prompt"]:
        reason = f"the spec admits no prompt over the advertised {window}-token window"
        raise ScenarioSkipped(reason, WINDOW_COVERS, SkipCause.NOT_DECLARED)
    item.send(probe)


def _models_listing(item: ItemRun) -> Exchange:
    """``GET /v1/models`` (the spec's path prefix), out of the request budget; its answer
    is no completion, so it is counted but not judged."""
    from conformance.run.session import BudgetSpent

    run = item.run
    if run.rate_limited or run.health.down is not None:
        cause = SkipCause.RATE_LIMITED if run.rate_limited else SkipCause.TARGET
        raise ScenarioSkipped(
            "GET /v1/models not sent: the target "
            + ("is rate limited" if run.rate_limited else "stopped serving"),
            WINDOW_COVERS,
            cause,
        )
    try:
        run.budget.take_request()
    except BudgetSpent as exc:
        raise ScenarioSkipped(str(exc), WINDOW_COVERS, SkipCause.BUDGET) from None
    label = "the model list (the advertised context window)"
    listing = run.client.get(f"{item.spec.path_prefix}/models", Case({}, "probe", label))
    item.results.record(listing, [])
    return listing


def first_text(body: object) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("choices"), list) and body["choices"]:
        choice = body["choices"][0]
        if isinstance(choice, dict) and isinstance(choice.get("text"), str):
            return str(choice["text"])
    return None


def _sdk_cases(run: RunState, _: Any) -> list[Case]:
    from conformance.run import sdk

    if not sdk.available():
        raise ScenarioSkipped(
            "the openai package is not installed: SDK compatibility not tested",
            ("SDK-COMPLETION", "SDK-STREAM"),
        )
    if run.concurrency > 1:
        sdk.preload()  # its first send would import it holding a slot: start it now
    spec, tags = run.spec, frozenset({"sdk"})
    base = {"model": run.settings.model, "max_tokens": max(1, min(run.settings.max_tokens, 6))}
    two = {"prompt": ["Say something", "And more"], "n": 2, "logprobs": 2, "echo": True}
    usage = {"n": 2, "stream": True, "stream_options": {"include_usage": True}}
    one = {**base, "prompt": "Say something"}
    return [
        case(spec, {**base, **two}, mode="valid", label="SDK: n=2, logprobs=2, echo, two prompts", tags=tags),
        case(spec, one, mode="valid", label="SDK: plain", tags=tags),
        case(spec, {**one, **usage}, mode="valid", label="SDK: stream, n=2, include_usage", tags=tags),
        # Plain twins, so a target that declines n > 1 still gets an SDK verdict.
        case(spec, {**one, "stream": True}, mode="valid", label="SDK: stream, plain", tags=tags),
    ]  # fmt: skip


def _sdk_send(client: Any, c: Case) -> Any:
    from conformance.run import sdk

    return sdk.send(client, c)


# -- streams -------------------------------------------------------------------------------


def _usage_chunk(run: RunState, include_usage: bool) -> list[Case]:
    """With include_usage exactly one usage chunk comes last; without it, none at all."""
    s = run.settings
    body: dict[str, Any] = {
        "model": s.model,
        "prompt": "Name two rivers:",
        "max_tokens": s.max_tokens,
        "n": 2,
        "stream": True,
    }
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    return [_described(run.spec, body)]


def _stream_twin(item: ItemRun, _: Any) -> None:
    """Ask the same request at temperature 0 without streaming and streamed, compared.

    The stream asks for its usage chunk (include_usage), so its usage is compared with
    the non-streamed one; a third copy asks for `n: 2` with one token each, so that its
    prompt_tokens is compared with the n=1 count of the same prompt (checks.invariants).
    None depends on another's answer, so all go out at once; each copy is judged after
    the plain twin, against it. The prompt names a river spelled with a non-ASCII letter,
    which an answer tends to repeat: a stream that breaks multi-byte UTF-8 then shows it
    (checks.stream_text).
    """
    from conformance.judging.checks.invariants import N_TWIN_TAG
    from conformance.judging.checks.streaming import TWIN_TAG

    spec = item.spec
    body = _greedy(item.settings, "Describe the river Rhône in a few words:")
    plain = case(spec, body, label="stream probe: non-streamed twin")
    usage = {"stream_options": {"include_usage": True}}
    streamed = case(
        spec,
        {**body, "stream": True, **usage},
        label="stream probe: the same request streamed, include_usage",
        tags=frozenset({TWIN_TAG}),
    )
    copies = [streamed]
    if "n" in spec.request_properties:
        n_twin = {**body, "n": 2, "max_tokens": 1}
        copies.append(
            case(spec, n_twin, label="n probe: the same prompt, n=2", tags=frozenset({N_TWIN_TAG}))
        )
    sends = [item.dispatch(plain), *(item.dispatch(c) for c in copies)]
    twin = item.receive(sends[0])
    for sent in sends[1:]:
        item.receive(sent, related=(twin,) if twin else ())


def _stream_edges(run: RunState, _: Any) -> list[Case]:
    """Streams that servers get wrong, always sent: echo of a text prompt, max_tokens 0."""
    s = run.settings
    base = {"model": s.model, "prompt": "Say hi", "stream": True}
    return [
        _described(run.spec, {**base, "echo": True, "max_tokens": s.max_tokens}),
        _described(run.spec, {**base, "max_tokens": 0, "stop": ["\n"]}),
    ]


def _declared_defaults(run: RunState, _: Any) -> list[Case]:
    """One request without max_tokens, judged against the document's declared default.

    The only request whose cost the target's default decides: a count prompt, at
    temperature 0, so that a model that follows it reaches the default (16 tokens).
    """
    from conformance.judging.checks.defaults import DEFAULT_MAX_TOKENS_TAG, default_max_tokens

    if default_max_tokens(run.spec) is None:
        raise ScenarioSkipped(
            "the spec declares no default for max_tokens",
            ("MAX-TOKENS-DEFAULT",),
            SkipCause.NOT_DECLARED,
        )
    body = {
        "model": run.settings.model,
        "prompt": "Count slowly from one to one hundred:",
        "temperature": 0,
    }
    tags = frozenset({DEFAULT_MAX_TOKENS_TAG})
    return [case(run.spec, body, label="max_tokens left out (the declared default)", tags=tags)]


def _batched(
    name: str, cases: Callable[[RunState, Any], list[Case]], *, costly: bool = False
) -> Scenario:
    return Scenario(name, cases=cases, params=BATCH_PARAMS, ids=BATCH_IDS, costly=costly)


VALID_REQUESTS = _batched("valid_requests", _valid, costly=True)
EDGE_REQUESTS = _batched("edge_requests", _edges)
INVALID_REQUESTS = _batched("invalid_requests", _invalid)
STOP_PROBE = Scenario("stop_probe", body=_stop_probe)
CONTEXT_WINDOW = Scenario("context_window", body=_context_window)
AUTH_PROBES = Scenario("auth_probes", cases=_auth)
UNKNOWN_MODEL = Scenario("unknown_model", cases=_unknown_model)
BAD_REQUESTS = Scenario("bad_requests", cases=_bad_requests)
SDK = Scenario("openai_sdk_reads_the_answers", cases=_sdk_cases, via=_sdk_send, costly=True)
VALID_STREAMS = _batched("valid_streams", lambda run, b: _valid(run, b, stream=True), costly=True)
USAGE_CHUNK = Scenario(
    "usage_chunk", cases=_usage_chunk, params=(True, False), ids=("include-usage", "no-usage")
)
STREAM_TWIN = Scenario("stream_matches_non_stream", body=_stream_twin)
STREAM_EDGES = Scenario("stream_edges", cases=_stream_edges)
DECLARED_DEFAULTS = Scenario("declared_defaults", cases=_declared_defaults)


# -- capabilities and deep fuzz --------------------------------------------------------------


def _capabilities(item: ItemRun, _: Any) -> None:
    """One probe per optional feature, sent up to ``--concurrency`` at once; the seed
    probe's second request is sent only once the first was answered 200 (as soon as it
    was, not after the other probes), and is judged after it."""
    from conformance.judging.verdict import capabilities

    s = item.settings
    probes = capabilities.capability_probes(
        item.spec, s.model, s.max_tokens, fit=lambda probe, point: _fit(item.spec, probe, point)
    )
    sends = [item.dispatch(p) for p in probes]
    again: dict[int, Future[Sent]] = {}
    for i, probe in enumerate(probes):
        if capabilities.feature_of(probe) == "seed":
            first = sends[i].result().exchange
            if first is not None and first.status == 200:
                again[i] = item.dispatch(capabilities.seed_twin(probe))
    answered: dict[str, Exchange] = {}
    for i, probe in enumerate(probes):
        feature = capabilities.feature_of(probe)
        compared = answered.get(capabilities.COMPARED_WITH.get(feature, ""))
        related: tuple[Exchange, ...] = (compared,) if compared is not None else ()
        exchange = item.receive(sends[i], related=related)
        if exchange is None:
            continue
        answered[feature] = exchange
        if i in again:
            related = (exchange,)
            twin = item.receive(again[i], related=related)
            if twin is None:
                continue
            exchange = twin
        findings = [f for f, ex in item.failures if ex is exchange]
        capabilities.record(item.results, probe, exchange, findings, related, item.spec)


def _fit(spec: Spec, probe: Case, point: frozenset[str]) -> Case | None:
    """``probe`` through the one constructor, or None if adapting it lost its point (a
    field it probes dropped, a null it sends replaced)."""
    from conformance.strategies import CaseSkipped, build_case

    try:
        fitted = build_case(spec, probe.body, mode="probe", label=probe.label, tags=probe.tags)
    except CaseSkipped:
        return None
    kept = all(
        k in fitted.body and (probe.body[k] is not None or fitted.body[k] is None) for k in point
    )
    return fitted if kept else None


def _fuzz(run: RunState, _: Any) -> list[Case]:
    """Deep fuzz (opt-in, ``--fuzz N``): schemathesis's own generation, judged alike."""
    s = run.settings
    if s.fuzz <= 0:
        raise ScenarioSkipped("deep fuzz is opt-in: --fuzz N", (), SkipCause.DESELECTED)
    from conformance.strategies import FuzzUnavailable, fuzz_cases

    try:
        return fuzz_cases(run.spec, s.fuzz, s.seed, model=s.model, max_tokens=s.max_tokens)
    except FuzzUnavailable as exc:
        raise ScenarioSkipped(str(exc), ()) from None


CAPABILITIES = Scenario("capabilities", body=_capabilities)
DEEP_FUZZ = Scenario("deep_fuzz", cases=_fuzz, costly=True)

#: Every scenario, in the order the pytest suite collects them.
SCENARIOS: tuple[Scenario, ...] = (
    VALID_REQUESTS,
    EDGE_REQUESTS,
    INVALID_REQUESTS,
    STOP_PROBE,
    DECLARED_DEFAULTS,
    AUTH_PROBES,
    UNKNOWN_MODEL,
    BAD_REQUESTS,
    CONTEXT_WINDOW,
    SDK,
    VALID_STREAMS,
    USAGE_CHUNK,
    STREAM_TWIN,
    STREAM_EDGES,
    CAPABILITIES,
    DEEP_FUZZ,
)
BY_NAME = {s.name: s for s in SCENARIOS}
