"""The capability table, measured one feature at a time.

Each probe is a minimal valid request plus ONE feature, so that a target refusing one
parameter is not said to refuse the others sent with it. A probe ends in one of four
outcomes:

- ``offered``: answered 200, and where the feature's effect is visible, it is there;
- ``declined``: a proper 4xx with the spec's error envelope (a capability gap, not a failure);
- ``ignored``: 200, but the feature had no effect (one choice for n=2, no logprobs, no
  echoed prompt, no usage chunk, two seeded answers that differ);
- ``broken``: a 5xx or another status, no answer, a 4xx without the error envelope, or a
  MUST failure of a requirement that owns the feature.

Generated requests count for conformance, never for this table. A probe whose body the
spec's request schema does not accept is not sent (the spec does not offer the feature).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from conformance.judging.document.oracle import CROSS_BEST_OF_BELOW_N, CROSS_BEST_OF_STREAM
from conformance.judging.document.spec import Spec
from conformance.judging.requirements import REGISTRY, Level
from conformance.judging.verdict.examples import Outcome
from conformance.judging.verdict.results import CapabilityOutcome, Finding, Results
from conformance.judging.wire.case import MAY_REFUSE_TAG, Case
from conformance.judging.wire.exchange import Exchange

TAG = "cap:"
PROMPT = "Say something"
TOKEN_PROMPT = [15, 16, 17]
#: Probes judged against another probe's answer: feature -> the feature it compares with.
COMPARED_WITH = {"echo:tokens": "prompt:tokens"}
SEED = 1234
#: Stop sequences sent when the spec sets no limit on their number.
DEFAULT_STOP_LIMIT = 4

# The requirements that judge what a feature does, by ID prefix: a MUST failure of one of
# them on the probe breaks the feature; a failure elsewhere (an empty `id`) does not.
OWNERS: dict[str, tuple[str, ...]] = {
    "n": ("CHOICES-", "STREAM-INDEXES"),
    "best_of": ("CHOICES-", "USAGE-MAX-TOKENS"),
    "echo": ("ECHO-", "STREAM-ECHO"),
    "logprobs": ("LOGPROBS-", "STREAM-LOGPROBS"),
    "stop": ("STOP-", "STREAM-STOP"),
    "include_usage": ("STREAM-USAGE",),
    "prompt": ("CHOICES-",),
}


def feature_of(case: Case) -> str:
    """The feature a probe case measures (its ``cap:`` tag), or empty."""
    return next((t[len(TAG) :] for t in sorted(case.tags) if t.startswith(TAG)), "")


def _probe(body: dict[str, Any], feature: str) -> Case:
    return Case(
        body, mode="probe", label=f"capability probe: {feature}", tags=frozenset({TAG + feature})
    )


def _limit(spec: Spec, field: str, key: str) -> int | None:
    """``maximum``/``maxItems`` of a request field, looking into its anyOf/oneOf branches."""
    todo: list[Any] = [spec.request_properties.get(field) or {}]
    while todo:
        node = todo.pop(0)
        if not isinstance(node, dict):
            continue
        value = node.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        for branch in ("anyOf", "oneOf", "allOf"):
            todo += node.get(branch) or []
    return None


#: Moves a probe to valid values under the spec, keeping the fields that make its point
#: (given as the second argument); None when it cannot (the engine passes the one case
#: constructor, conformance.strategies.build_case, which this core module may not import).
Fit = Callable[[Case, frozenset[str]], Case | None]


def capability_probes(
    spec: Spec, model: str, max_tokens: int, *, fit: Fit | None = None
) -> list[Case]:
    """One probe per feature the spec's request schema accepts, each tagged ``cap:<feature>``.

    The seed probe is one case; its twin (the same request again) is built by
    :func:`seed_twin` and sent with the first as ``related``. Without ``fit``, a probe the
    spec rejects is left out; with it, the probe is adapted (a copy of a spec that allows
    5 characters of prompt still gets every probe, with a shorter prompt).
    """
    base = {"model": model, "prompt": PROMPT, "max_tokens": max(1, max_tokens)}
    plain = {**base, "temperature": 0}
    wanted: list[tuple[str, dict[str, Any]]] = [
        ("echo", {**plain, "echo": True}),
        ("logprobs", {**plain, "logprobs": 1}),
        ("n", {**base, "n": 2}),
        ("best_of", {**base, "n": 1, "best_of": 2}),
        ("suffix", {**plain, "suffix": " The end."}),
        ("prompt:string", {**plain, "prompt": PROMPT}),
        ("prompt:strings", {**plain, "prompt": [PROMPT, "Say more"]}),
        ("prompt:tokens", {**plain, "prompt": TOKEN_PROMPT}),
        ("prompt:token-lists", {**plain, "prompt": [[15, 16], [17, 18]]}),
        (
            "include_usage",
            {**plain, "stream": True, "stream_options": {"include_usage": True}},
        ),
        ("seed", {**base, "temperature": 1, "seed": SEED}),
        # A token id every vocabulary has: the token-id prompt's own (GPT-2's 50256 is
        # past a small model's vocabulary, where a 400 is no decline of logit_bias).
        ("logit_bias", {**plain, "logit_bias": {str(TOKEN_PROMPT[-1]): -100}}),
    ]
    top = _limit(spec, "logprobs", "maximum")
    if top is not None and top > 1:
        wanted.append(("logprobs:max", {**plain, "logprobs": top}))
    stops = _limit(spec, "stop", "maxItems") or DEFAULT_STOP_LIMIT
    wanted.append(("stop:max", {**plain, "stop": [f"\u2042{i}" for i in range(stops)]}))
    # A feature in each form real servers treat apart: `stop` as a single string as well
    # as a list; echo with a token-id prompt as well as a text one (after prompt:tokens,
    # whose answer shows what echo adds: see _no_echo_tokens).
    wanted.append(("stop:string", {**plain, "stop": "\u20420"}))
    wanted.append(("echo:tokens", {**plain, "prompt": TOKEN_PROMPT, "echo": True}))
    for field in spec.request_properties:
        if field != "model":
            wanted.append((f"null:{field}", {**plain, field: None}))
    if fit is None:
        return [_probe(body, f) for f, body in wanted if spec.validate("request", body) is None]
    fitted = (fit(_probe(body, f), _point(f, body, plain)) for f, body in wanted)
    return [probe for probe in fitted if probe is not None]


def _point(feature: str, body: dict[str, Any], plain: dict[str, Any]) -> frozenset[str]:
    """The fields that make a probe's point: those it sets beyond the plain request."""
    fields = {k for k, v in body.items() if k not in plain or plain[k] != v}
    return frozenset(fields | ({"prompt"} if feature.startswith("prompt:") else set()))


def seed_twin(first: Case) -> Case:
    """The second, identical request of the seed probe: a seeded answer must repeat."""
    return Case(first.body, mode="probe", label=first.label + " (again)", tags=first.tags)


@dataclass(frozen=True, slots=True)
class Assessment:
    """One probe's outcome and why, for the table's detail column."""

    outcome: CapabilityOutcome
    detail: str


def _choices(exchange: Exchange) -> list[dict[str, Any]]:
    """The choices of a non-streamed answer, or every choice object of a stream's chunks."""
    if exchange.events is None:
        body = exchange.json
        items = body.get("choices") if isinstance(body, dict) else None
        return [c for c in items or [] if isinstance(c, dict)]
    out: list[dict[str, Any]] = []
    for chunk in _chunks(exchange):
        out += [c for c in chunk.get("choices") or [] if isinstance(c, dict)]
    return out


def _chunks(exchange: Exchange) -> list[dict[str, Any]]:
    out = []
    for ev in exchange.events or []:
        try:
            value = json.loads(ev.data)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _text(exchange: Exchange, index: int = 0) -> str:
    return "".join(
        str(c.get("text") or "") for c in _choices(exchange) if c.get("index", 0) == index
    )


def _error_message(exchange: Exchange) -> str | None:
    """The error envelope's message, or None when the body is no error envelope."""
    body = exchange.json
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


#: How much of a decline's message the table keeps (the target's words, quoted).
MESSAGE_CHARS = 120


def _quoted(message: str) -> str:
    short = " ".join(message.split())
    if len(short) > MESSAGE_CHARS:
        short = short[: MESSAGE_CHARS - 1] + "…"
    return json.dumps(short, ensure_ascii=False)


# What a feature visibly does to a 200 answer: a reason it had no effect, or None.
def _no_echo(case: Case, ex: Exchange, _: Sequence[Exchange]) -> str | None:
    return None if _text(ex).startswith(PROMPT) else "the answer does not start with the prompt"


def _no_echo_tokens(case: Case, ex: Exchange, related: Sequence[Exchange]) -> str | None:
    """The same token-id prompt without echo (the prompt:tokens probe, temperature 0) got
    the same text: echo added nothing. Unobservable without that answer."""
    if not related or related[0].status != 200 or related[0].case.body.get("echo"):
        return None
    if _text(ex) == _text(related[0]):
        return "the same text as the token-id prompt without echo"
    return None


def _no_logprobs(case: Case, ex: Exchange, _: Sequence[Exchange]) -> str | None:
    if any(isinstance(c.get("logprobs"), dict) for c in _choices(ex)):
        return None
    return "no choice carries a logprobs object"


def _choice_count(case: Case, ex: Exchange, _: Sequence[Exchange]) -> str | None:
    want = len(case.prompts) * case.n
    indexes = {c.get("index", 0) for c in _choices(ex)}
    return None if len(indexes) >= want else f"{len(indexes)} choice(s) for {want} asked"


def _no_usage(case: Case, ex: Exchange, _: Sequence[Exchange]) -> str | None:
    if any(isinstance(c.get("usage"), dict) for c in _chunks(ex)):
        return None
    return "no chunk carries a usage object"


def _not_repeated(case: Case, ex: Exchange, related: Sequence[Exchange]) -> str | None:
    if not related or related[0].status != 200:
        return None
    if _text(related[0]) == _text(ex):
        return None
    return "two identical seeded requests got different texts"


EFFECTS: dict[str, Callable[[Case, Exchange, Sequence[Exchange]], str | None]] = {
    "echo": _no_echo,
    "echo:tokens": _no_echo_tokens,
    "logprobs": _no_logprobs,
    "logprobs:max": _no_logprobs,
    "n": _choice_count,
    "prompt:strings": _choice_count,
    "prompt:token-lists": _choice_count,
    "include_usage": _no_usage,
    "seed": _not_repeated,
}


def owners(feature: str) -> tuple[str, ...]:
    """The ID prefixes of the requirements that judge what ``feature`` does (``OWNERS``)."""
    base = feature.split(":", 1)[0]
    if feature.startswith("stop"):
        base = "stop"
    return OWNERS.get(base, ())


def assess(
    case: Case,
    exchange: Exchange,
    findings: Iterable[Finding] = (),
    related: Sequence[Exchange] = (),
    spec: Spec | None = None,
) -> Assessment:
    """The outcome of one probe, with the reason shown in the table. A failure breaks the
    feature when its requirement is a MUST under ``spec`` (the judged document's level),
    or in the registry when no document is given."""
    feature = feature_of(case)
    status = exchange.status
    if status is None:
        return Assessment(
            CapabilityOutcome.BROKEN, f"no answer ({exchange.transport_error or 'no status'})"
        )
    if 400 <= status < 500 and status != 429:
        message = _error_message(exchange)
        if message is not None:
            # The target's own words say why: a reader (and a requirement it leaves out)
            # gets the decline as it was given.
            return Assessment(
                CapabilityOutcome.DECLINED, f"{status} with the error envelope: {_quoted(message)}"
            )
        return Assessment(CapabilityOutcome.BROKEN, f"{status} without the error envelope")
    if status != 200:
        return Assessment(CapabilityOutcome.BROKEN, f"status {status}")
    # No visible effect is the more precise diagnosis than the MUST failure it also causes
    # (one choice for n=2 fails CHOICES-COUNT too): the finding still counts for the verdict.
    effect = EFFECTS.get(feature)
    reason = effect(case, exchange, related) if effect else None
    if reason:
        return Assessment(CapabilityOutcome.IGNORED, reason)
    prefixes = owners(feature)
    for f in findings:
        req = REGISTRY.get(f.requirement)
        if req is not None and spec is not None:
            req = req.under(spec)
        must = req is not None and req.level == Level.MUST
        if f.outcome == Outcome.FAILED and must and prefixes and f.requirement.startswith(prefixes):
            return Assessment(CapabilityOutcome.BROKEN, f"{f.requirement} failed: {f.message}")
    return Assessment(
        CapabilityOutcome.OFFERED, "200" + ("" if effect else " (effect not observable)")
    )


def classify(
    case: Case,
    exchange: Exchange,
    findings: Iterable[Finding] = (),
    related: Sequence[Exchange] = (),
    spec: Spec | None = None,
) -> CapabilityOutcome:
    """``offered`` | ``declined`` | ``ignored`` | ``broken`` (see :func:`assess`)."""
    return assess(case, exchange, findings, related, spec).outcome


def record(
    results: Results,
    case: Case,
    exchange: Exchange,
    findings: Iterable[Finding] = (),
    related: Sequence[Exchange] = (),
    spec: Spec | None = None,
) -> Assessment:
    """Assess one probe and enter it in ``results``' capability table."""
    verdict = assess(case, exchange, findings, related, spec)
    results.note_capability(feature_of(case), verdict.outcome, verdict.detail)
    return verdict


#: Table entries noted from what a run sent for conformance rather than from a probe:
#: a valid edge value the target refused with a proper 4xx, one entry per value (its
#: label). Not counted in the capability figure: an offered value has no entry to match.
VALUE = "value:"
#: Invalid best_of requests a target that implements best_of refuses (OpenAI: best_of
#: must be greater than n, and its results cannot be streamed): answered 200, best_of is
#: accepted and ignored, whatever the probe's 200 suggested (vLLM 0.32 drops it).
BEST_OF_FORMS = {
    CROSS_BEST_OF_BELOW_N: (
        "best_of:below-n",
        "best_of below n answered 200: a best_of that must be greater than n is not enforced",
    ),
    CROSS_BEST_OF_STREAM: (
        "best_of:stream",
        "best_of with stream answered 200: best_of's results cannot be streamed",
    ),
}


def observed(case: Case, exchange: Exchange) -> tuple[str, CapabilityOutcome, str] | None:
    """A capability-table entry (feature, outcome, detail) that a conformance request shows
    by itself: a valid edge value declined with a proper 4xx, or an invalid best_of request
    served (best_of ignored). None for anything else (probes enter the table themselves)."""
    status = exchange.status
    if status is None:
        return None
    if case.mode == "invalid" and status == 200 and case.breaks in BEST_OF_FORMS:
        feature, detail = BEST_OF_FORMS[case.breaks]
        return feature, CapabilityOutcome.IGNORED, detail
    message = _error_message(exchange)
    refused = 400 <= status < 500 and status != 429 and message is not None
    if case.mode == "edge" and refused and MAY_REFUSE_TAG not in case.tags:
        detail = f"{status} with the error envelope: {_quoted(message or '')}"
        return VALUE + (case.label or "an edge request"), CapabilityOutcome.DECLINED, detail
    return None


def _matches(feature: str, name: str) -> bool:
    return feature == name or feature.startswith(name + ":")


def unmet(results: Results, required: Iterable[str]) -> list[str]:
    """Why each required capability is not offered, one line each (``--require-capabilities``).

    A name covers its variants (``logprobs`` covers ``logprobs:max``; ``prompt`` every
    prompt form). A capability never probed is unmet too: untested is not offered.
    """
    out = []
    for name in required:
        entries = {f: e for f, e in results.capabilities.items() if _matches(f, name)}
        if not entries:
            out.append(f"{name}: not probed in this run")
            continue
        for feature, entry in sorted(entries.items()):
            if entry.outcome != CapabilityOutcome.OFFERED:
                out.append(f"{feature}: {entry.outcome} ({entry.detail})")
    return out
