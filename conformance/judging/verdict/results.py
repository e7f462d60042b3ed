"""Findings and their tally per requirement: what the reports read, never recompute.

``evaluate`` judges one exchange by every requirement that applies to it. A ``Results``
object tallies the findings per requirement, keeps the first few failing examples with
their evidence, and round-trips through JSON so that pytest-xdist workers, CI shards and
earlier runs (``--baseline``) can be merged into one verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from conformance.judging.document.spec import Spec
from conformance.judging.requirements import Context, Level, Requirement, Unsupported, Violation
from conformance.judging.verdict.examples import Example, Outcome, evidence, jsonable
from conformance.judging.verdict.fingerprint import fingerprint, request_class
from conformance.judging.verdict.latency import LatencySummary, StreamLatency
from conformance.judging.verdict.record import RunRecord
from conformance.judging.verdict.run_info import VERDICT_KEYS, RunInfo
from conformance.judging.verdict.state import StateOwner
from conformance.judging.wire.case import REPEATED_TAG, Case
from conformance.judging.wire.exchange import Exchange, SSEEvent

if TYPE_CHECKING:
    from conformance.judging.verdict.verdict import Verdict

RESULTS_SCHEMA_VERSION = 2
MAX_EXAMPLES = 3
#: Distinct failing fingerprints kept per requirement; the rest are only counted.
MAX_FINGERPRINTS = 200


def case_key(case: Case) -> str:
    """The part of a fingerprint that names the request: its class, never its label
    (conformance.judging.verdict.fingerprint.request_class)."""
    return request_class(case)


@dataclass(frozen=True, slots=True)
class Finding:
    """The outcome of one requirement on one exchange.

    ``outcome`` is ``passed``, ``failed``, ``unsupported`` (a capability declined with a
    proper 4xx) or ``error`` (the check itself raised: a defect of the suite, which fails
    the run); given as a string it is read as its Outcome. ``case`` is the request's class
    (:func:`case_key`); ``path`` the JSON path or event index the finding is about, when
    the check said.
    """

    requirement: str
    outcome: Outcome
    message: str = ""
    path: str | None = None
    expected: Any = None
    actual: Any = None
    case: str = ""
    witness: str | None = (
        None  # what it rests on (Violation.witness; conformance.judging.verdict.attribution)
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome(self.outcome))

    @property
    def fingerprint(self) -> str:
        """What stays the same when the same defect is found again (conformance.judging.verdict.fingerprint):
        requirement, request class, normalised path and message."""
        return fingerprint(self.requirement, self.case, self.path, self.message)


def judged_case(spec: Spec, case: Case) -> Case:
    """``case`` as ``spec`` judges it: an invalid case whose request breaks no rule that
    ``spec`` states (its schema and the cross-field rules its own text states, by the same
    oracle that builds invalid cases) is a valid request under ``spec``.

    A case labelled under another document (best_of < n is AIHubMix's rule, not Nscale's)
    or recorded by an older suite is then judged as the valid request it is there: not by
    INVALID-REJECTED (a 200 is a proper answer), by the valid-request rules instead.
    Cases with a free-text reason (credentials, an unknown model) keep their label.
    """
    # Imported here: the oracle's openapi-core is loaded only when a case is judged.
    from conformance.judging.document.oracle import RULE_NAME
    from conformance.judging.document.validation import ValidatorUnavailable, oracle_rules

    if case.mode != "invalid" or case.auth != "default" or not case.breaks:
        return case
    if not RULE_NAME.match(case.breaks):
        return case
    try:
        broken = oracle_rules(spec, case.body, raw=case.raw_body)
    except ValidatorUnavailable:
        return case  # no oracle: the label stands
    return case if broken else replace(case, mode="valid")


#: Witnesses judged apart in each mode: streamed logprobs shown wrong (cumulative per
#: chunk, say) say nothing of the same server's non-streamed logprobs; a usage chunk that
#: STREAM-USAGE-MATCHES shows wrong says nothing of a body's usage (USAGE-COMPLETION-TOKENS,
#: one tally over both modes, still shows both: conformance.judging.verdict.attribution.SHOWN_BY).
PER_MODE_WITNESSES = ("logprobs", "usage")


def _scoped_witness(witness: str | None, exchange: Exchange) -> str | None:
    if witness in PER_MODE_WITNESSES and exchange.case.stream:
        return f"stream-{witness}"
    return witness


def evaluate(
    requirements: list[Requirement],
    spec: Spec,
    exchange: Exchange,
    related: tuple[Exchange, ...] = (),
) -> list[Finding]:
    """Judge ``exchange`` by every requirement that applies to it.

    Every check runs behind a barrier: an exception other than Violation/Unsupported is a
    defect of the suite, recorded as an ``error`` finding of that requirement on this
    exchange (with the exception type and the check's name), so that one broken check can
    neither lose the other findings of the exchange nor pass unnoticed.
    """
    ctx = Context(judged_case(spec, exchange.case), exchange, spec, related)
    key = case_key(exchange.case)
    findings = []
    for req in requirements:
        # When the SDK gave up mid-answer, the rest was never read: only the SDK
        # requirements may judge such an exchange (the suite's own client judges its twin).
        if exchange.cut_short_by_sdk and req.area != "sdk":
            continue
        try:
            if not req.applies(ctx):
                continue
            req.check(ctx)
        except Violation as exc:
            findings.append(
                Finding(
                    req.id,
                    Outcome.FAILED,
                    str(exc),
                    path=getattr(exc, "path", None),
                    expected=getattr(exc, "expected", None),
                    actual=getattr(exc, "actual", None),
                    case=key,
                    witness=_scoped_witness(getattr(exc, "witness", None), exchange),
                )
            )
        except Unsupported as exc:
            findings.append(Finding(req.id, Outcome.UNSUPPORTED, str(exc), case=key))
        except Exception as exc:  # the barrier: see the docstring
            name = getattr(req.check, "__qualname__", repr(req.check))
            message = f"suite defect: check {name} raised {type(exc).__name__}: {exc}"
            findings.append(Finding(req.id, Outcome.ERROR, message, case=key))
        else:
            findings.append(Finding(req.id, Outcome.PASSED, case=key))
    return findings


class Status(StrEnum):
    """Where one requirement ended in one run, as every report shows it."""

    PASSED = "passed"
    FAILED = "failed"  # failed, and the failure decides the verdict
    WARNED = "warned"  # failed, but its level does not decide (SHOULD without --strict-should)
    UNSUPPORTED = "unsupported"  # a CAPABILITY the target declined properly
    NOT_TESTED = "not-tested"
    # A MUST with a stated reason it cannot apply (the verdict's coverage): the reports
    # set it (conformance.reports.summary.status_of), never Tally.status_under, which
    # knows no coverage.
    NOT_APPLICABLE = "not-applicable"
    ERROR = "error"  # the check itself raised: a suite defect, which fails the run


@dataclass
class Tally:
    """How one requirement fared over a run.

    ``fingerprints`` holds the distinct fingerprints of its failures (sorted, at most
    MAX_FINGERPRINTS; ``fingerprints_dropped`` counts the others): what ``--baseline``,
    merge and compare tell apart. ``errored`` counts exchanges on which the check itself
    raised (a suite defect).
    """

    id: str
    level: Level
    area: str
    statement: str
    source: str
    evidence: str = ""
    #: Why the requirement has its level under the judged document and contract.
    why_level: str = ""
    checked: int = 0
    failed: int = 0
    unsupported: int = 0
    errored: int = 0
    fingerprints: list[str] = field(default_factory=list)
    fingerprints_dropped: int = 0
    examples: list[Example] = field(default_factory=list)
    #: Failures resting on a witness (conformance.judging.verdict.attribution): witness -> fingerprint -> n.
    witnessed: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Why failures were withheld (conformance.judging.verdict.attribution), one line each.
    not_judged: list[str] = field(default_factory=list)
    #: Requests sent more than once (case.REPEATED_TAG), by label: [sends failed, sends
    #: judged]. results.json keeps those with a failure.
    sends: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.level = Level(self.level)  # given as a string, read as its Level

    @property
    def intermittent(self) -> list[tuple[str, int, int]]:
        """(label, failed, sent) of each repeated request that failed on some sends only."""
        return [(label, f, n) for label, (f, n) in sorted(self.sends.items()) if 0 < f < n]

    @property
    def status(self) -> Status:
        """Where it ended, whatever its level (:meth:`status_under` says whether it decides)."""
        return self.status_under(deciding=None)

    def status_under(self, deciding: frozenset[str] | None) -> Status:
        """Where it ended: suite errors, failures, declines, then checks. A failure of a
        level not in ``deciding`` (when given) is WARNED: reported, not deciding."""
        if self.errored:
            return Status.ERROR
        if self.failed:
            decides = deciding is None or self.level in deciding
            return Status.FAILED if decides else Status.WARNED
        if self.unsupported:
            return Status.UNSUPPORTED
        return Status.PASSED if self.checked else Status.NOT_TESTED

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "level": self.level.value,
            "area": self.area,
            "statement": self.statement,
            "source": self.source,
            "evidence": self.evidence,
            "why_level": self.why_level,
            "checked": self.checked,
            "failed": self.failed,
            "unsupported": self.unsupported,
            "errored": self.errored,
            "fingerprints": list(self.fingerprints),
            "fingerprints_dropped": self.fingerprints_dropped,
            "examples": [ex.to_json() for ex in self.examples],
            "witnessed": {w: dict(prints) for w, prints in self.witnessed.items()},
            "not_judged": list(self.not_judged),
            "sends": {label: list(c) for label, c in sorted(self.sends.items()) if c[0]},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tally:
        return cls(
            **{**data, "examples": [Example.from_json(ex) for ex in data.get("examples", [])]}
        )

    def add_fingerprints(self, prints: list[str], dropped: int = 0) -> None:
        """Fold in failing fingerprints, keeping the first MAX_FINGERPRINTS in sort order."""
        union = sorted(set(self.fingerprints) | set(prints))
        self.fingerprints = union[:MAX_FINGERPRINTS]
        self.fingerprints_dropped += dropped + len(union) - len(self.fingerprints)

    def add_example(self, example: Example) -> None:
        """Keep ``example`` unless there are enough, or one of the same fingerprint is kept."""
        fp = example.fingerprint
        if len(self.examples) >= MAX_EXAMPLES:
            return
        if fp and any(ex.fingerprint == fp for ex in self.examples):
            return
        self.examples.append(example)


class CapabilityOutcome(StrEnum):
    """How a target answered a capability probe (conformance.judging.verdict.capabilities),
    from the best to the worst: merging two observations keeps the worse."""

    OFFERED = "offered"  # answered 200 and, where visible, the feature had its effect
    DECLINED = "declined"  # a proper 4xx with the error envelope: a gap, not a failure
    IGNORED = "ignored"  # answered 200, but the feature had no effect
    BROKEN = "broken"  # a 5xx, no answer, a 4xx without the envelope, a MUST it owns failed


#: The capability outcomes, best first (the order every report shows them in).
CAPABILITY_OUTCOMES = tuple(CapabilityOutcome)


@dataclass(slots=True)
class Spent:
    """What a run cost: requests sent (retries included), tokens the target reported in
    ``usage.total_tokens``, and retries after rate limiting (results.json ``spent``)."""

    requests: int = 0
    tokens: int = 0
    retries: int = 0

    def add(self, other: Spent) -> None:
        self.requests += other.requests
        self.tokens += other.tokens
        self.retries += other.retries

    def to_json(self) -> dict[str, int]:
        return {"requests": self.requests, "tokens": self.tokens, "retries": self.retries}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Spent:
        return cls(
            int(data.get("requests", 0)), int(data.get("tokens", 0)), int(data.get("retries", 0))
        )


@dataclass(frozen=True, slots=True)
class Capability:
    """One entry of the capability table: how the target answered the single-feature probe
    (``outcome``) and what was seen (``detail``)."""

    outcome: CapabilityOutcome
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", CapabilityOutcome(self.outcome))

    def to_json(self) -> dict[str, str]:
        return {"outcome": self.outcome.value, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Capability:
        return cls(CapabilityOutcome(str(data.get("outcome"))), str(data.get("detail", "")))


@dataclass
class Results(StateOwner):
    """Everything a run found, per requirement, plus what it spent.

    ``capabilities`` is the capability table, feature -> ``Capability``, filled
    by the single-feature probes of conformance.judging.verdict.capabilities (never by generated requests).
    ``info`` is the run's context and what it saw (results.json ``meta``), ``run_record``
    what the verdict depends on: the run's state, written only through the named methods
    of conformance.judging.verdict.state (its one owner); ``verdict`` the verdict the judge
    core decided, once it has (conformance.judging.verdict.conclusion.conclude).
    """

    tallies: dict[str, Tally] = field(default_factory=dict)
    info: RunInfo = field(default_factory=RunInfo)
    spent: Spent = field(default_factory=Spent)
    capabilities: dict[str, Capability] = field(default_factory=dict)
    latency: list[StreamLatency] = field(default_factory=list)
    verdict: Verdict | None = None
    #: The run record without the identity ``info`` holds (``run_record`` shows it whole;
    #: conformance.judging.verdict.state); None: nothing recorded.
    _record: RunRecord | None = field(default=None, repr=False)

    def decided(self, verdict: Verdict) -> Verdict:
        """Keep the verdict the judge core decided for these results; return it."""
        self.verdict = verdict
        for key in VERDICT_KEYS:
            self.info.mark(key)
        return verdict

    @classmethod
    def for_requirements(cls, requirements: list[Requirement]) -> Results:
        return cls(
            tallies={
                r.id: Tally(
                    r.id,
                    r.level,
                    r.area,
                    r.statement,
                    r.source,
                    evidence=str(getattr(r, "evidence", "") or ""),
                    why_level=str(getattr(r, "why_level", "") or ""),
                )
                for r in requirements
            }
        )

    def record(self, exchange: Exchange, findings: list[Finding], *, spend: bool = True) -> None:
        """Tally the findings of one exchange and count what it cost (``spend=False``: a
        429 answer waited out, whose request the retried exchange already counts)."""
        if spend:
            self.spent.requests += 1 + exchange.retries
            self.spent.retries += exchange.retries
            self.spent.tokens += tokens_used(exchange)
        shown = None
        key = case_key(exchange.case)
        repeated = REPEATED_TAG in exchange.case.tags
        for f in findings:
            if not f.case:  # a finding made without its case: the exchange names it
                f = replace(f, case=key)
            tally = self.tallies[f.requirement]
            tally.checked += 1
            if repeated and f.outcome in (Outcome.PASSED, Outcome.FAILED):
                sends = tally.sends.setdefault(exchange.case.label, [0, 0])
                sends[0] += f.outcome == Outcome.FAILED
                sends[1] += 1
            if f.outcome == Outcome.UNSUPPORTED:
                tally.unsupported += 1
            elif f.outcome == Outcome.FAILED:
                tally.failed += 1
                tally.add_fingerprints([f.fingerprint])
                if f.witness:
                    prints = tally.witnessed.setdefault(f.witness, {})
                    prints[f.fingerprint] = prints.get(f.fingerprint, 0) + 1
            elif f.outcome == Outcome.ERROR:
                tally.errored += 1
            if f.outcome != Outcome.PASSED:
                shown = shown or evidence(exchange)
                tally.add_example(
                    Example(
                        f.message,
                        f.outcome,
                        f.fingerprint,
                        f.path,
                        jsonable(f.expected),
                        jsonable(f.actual),
                        shown,
                    )
                )

    def note_capability(self, feature: str, outcome: CapabilityOutcome, detail: str = "") -> None:
        """Enter one probe's outcome in the capability table; the worse of two stays."""
        if outcome not in CAPABILITY_OUTCOMES:
            raise ValueError(f"unknown capability outcome {outcome!r}")
        known = self.capabilities.get(feature)
        rank = CAPABILITY_OUTCOMES.index
        if known is None or rank(outcome) > rank(known.outcome):
            self.capabilities[feature] = Capability(outcome, detail)

    def merge(self, other: Results) -> None:
        """Fold another run's (a worker's, a shard's) results into this one."""
        for rid, theirs in other.tallies.items():
            mine = self.tallies.get(rid)
            if mine is None:
                mine = self.tallies[rid] = Tally(
                    theirs.id,
                    theirs.level,
                    theirs.area,
                    theirs.statement,
                    theirs.source,
                    evidence=theirs.evidence,
                    why_level=theirs.why_level,
                )
            mine.checked += theirs.checked
            mine.failed += theirs.failed
            mine.unsupported += theirs.unsupported
            mine.errored += theirs.errored
            mine.add_fingerprints(theirs.fingerprints, theirs.fingerprints_dropped)
            for example in theirs.examples:
                mine.add_example(example)
            for witness, prints in theirs.witnessed.items():
                into = mine.witnessed.setdefault(witness, {})
                for fp, n in prints.items():
                    into[fp] = into.get(fp, 0) + n
            mine.not_judged += [n for n in theirs.not_judged if n not in mine.not_judged]
            for label, (failed, sent) in theirs.sends.items():
                counts = mine.sends.setdefault(label, [0, 0])
                counts[0], counts[1] = counts[0] + failed, counts[1] + sent
        self.spent.add(other.spent)
        for feature, entry in other.capabilities.items():
            self.note_capability(feature, entry.outcome, entry.detail)
        self.latency += other.latency
        # What attribution withheld in each part (a shard) stays evidence for the whole, and
        # so do the requests answered when sent again alone.
        self.absorb_state(other)
        if self.verdict is None:
            self.verdict = other.verdict  # a part's own, until the whole is decided

    def failing(self, *, strict: bool = False, known: frozenset[str] = frozenset()) -> list[Tally]:
        """Requirements whose findings decide the verdict (SHOULD too under ``strict``).

        ``known`` holds the requirements already failing in a baseline: they do not decide.
        A requirement whose check raised (see :meth:`errors`) always decides: a suite defect
        must never end in a green run, whatever the level or the baseline.
        """
        levels = {Level.MUST} | ({Level.SHOULD} if strict else set())
        return [
            t
            for t in self.tallies.values()
            if t.errored or (t.failed and t.level in levels and t.id not in known)
        ]

    def errors(self) -> list[Tally]:
        """Requirements whose check raised on some exchange: the run's verdict is "error"."""
        return [t for t in self.tallies.values() if t.errored]

    def to_json(self) -> dict[str, Any]:
        verdict = None if self.verdict is None else self.verdict.to_json()
        return {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "meta": self.info.to_json(verdict),
            "spent": self.spent.to_json(),
            "requirements": [t.to_json() for t in self.tallies.values()],
            "capabilities": {f: c.to_json() for f, c in self.capabilities.items()},
            "latency": [entry.to_dict() for entry in self.latency],
            "latency_summary": LatencySummary.of(self.latency, self.info.concurrency).to_dict(),
        } | ({} if self.run_record.blank else {"record": self.run_record.to_json()})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Results:
        if data.get("schema_version") != RESULTS_SCHEMA_VERSION:
            raise ValueError(
                f"results schema_version {data.get('schema_version')!r} is not "
                f"{RESULTS_SCHEMA_VERSION}"
            )
        from conformance.judging.verdict.verdict import Verdict

        meta = dict(data.get("meta", {}))
        record = data.get("record")
        results = cls(
            tallies={t["id"]: Tally.from_json(t) for t in data.get("requirements", [])},
            info=RunInfo.from_json(meta),
            verdict=Verdict.from_json(meta),
            spent=Spent.from_json(data.get("spent", {})),
            capabilities={
                k: Capability.from_json(v) for k, v in data.get("capabilities", {}).items()
            },
            latency=[StreamLatency.from_dict(e) for e in data.get("latency", [])],
        )
        # An older results.json kept no record: decide() reads what it recorded instead
        # (conformance.judging.verdict.decision.recorded_record).
        if record is not None:
            results.set_record(RunRecord.from_json(record))
        return results

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False)

    @classmethod
    def loads(cls, text: str) -> Results:
        """Results from the text of a results.json (:meth:`dumps` read back)."""
        return cls.from_json(json.loads(text))


def tokens_used(exchange: Exchange) -> int:
    """Tokens the target says it spent on this exchange (0 when it does not say)."""
    usage = None
    if exchange.events is not None:
        usage = _stream_usage(exchange.events)
    elif exchange.status == 200 and isinstance(exchange.json, dict):
        usage = exchange.json.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
        return int(usage["total_tokens"])
    return 0


def _stream_usage(events: list[SSEEvent]) -> Any:
    """The ``usage`` object of the last chunk that carries one, else None.

    Called twice per exchange (the budget, the tally), so it parses as little as it can:
    it reads from the end, where the usage chunk is, and skips events whose data cannot
    hold a ``usage`` key (a JSON key spells it out unless it uses ``\\u`` escapes).
    """
    for ev in reversed(events):
        data = ev.data
        if ("usage" not in data and "\\u" not in data) or data == "[DONE]":
            continue
        try:
            payload = json.loads(data)
        except ValueError:
            continue
        if isinstance(payload, dict) and isinstance(payload.get("usage"), dict):
            return payload["usage"]
    return None
