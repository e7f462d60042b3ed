"""Findings and their tally per requirement: what the reports read, never recompute.

``evaluate`` judges one exchange by every requirement that applies to it. A ``Results``
object tallies the findings per requirement, keeps the first few failing examples with
their evidence, and round-trips through JSON so that pytest-xdist workers, CI shards and
earlier runs (``--baseline``) can be merged into one verdict.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from conformance.case import Case
from conformance.exchange import Exchange, SSEEvent
from conformance.fingerprint import fingerprint, request_class
from conformance.judging.record import RunRecord
from conformance.latency import percentile
from conformance.requirements import Context, Level, Requirement, Unsupported, Violation
from conformance.spec import Spec

RESULTS_SCHEMA_VERSION = 2
#: Results.meta key: how often each status code was answered (status as a string).
OBSERVED = "observed_statuses"
#: Results.meta key: the findings conformance.attribution withheld (kept whole by merge).
WITHHELD = "attribution"
#: Results.meta key: the requests that met a time-out or a cut beside other requests and
#: were answered when sent again alone (not findings): {"case", "note", "held_by"} each,
#: ``held_by`` naming the request that held the target when one did (conformance/resend.py).
SENT_ALONE = "sent_alone"
MAX_EXAMPLES = 3
#: Distinct failing fingerprints kept per requirement; the rest are only counted.
MAX_FINGERPRINTS = 200
EXCERPT_CHARS = 2000
VALUE_CHARS = 500
TRANSCRIPT_EVENTS = 40


def case_key(case: Case) -> str:
    """The part of a fingerprint that names the request: its class, never its label
    (conformance.fingerprint.request_class)."""
    return request_class(case)


@dataclass(frozen=True, slots=True)
class Finding:
    """The outcome of one requirement on one exchange.

    ``outcome`` is ``passed``, ``failed``, ``unsupported`` (a capability declined with a
    proper 4xx) or ``error`` (the check itself raised: a defect of the suite, which fails
    the run). ``case`` is the request's class (:func:`case_key`); ``path`` the JSON path or event
    index the finding is about, when the check said.
    """

    requirement: str
    outcome: str
    message: str = ""
    path: str | None = None
    expected: Any = None
    actual: Any = None
    case: str = ""
    witness: str | None = None  # what it rests on (Violation.witness; conformance.attribution)

    @property
    def fingerprint(self) -> str:
        """What stays the same when the same defect is found again (conformance.fingerprint):
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
    from conformance.oracle import RULE_NAME, oracle_rules
    from conformance.validation import ValidatorUnavailable

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
#: one tally over both modes, still shows both: conformance.attribution.SHOWN_BY).
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
                    "failed",
                    str(exc),
                    path=getattr(exc, "path", None),
                    expected=getattr(exc, "expected", None),
                    actual=getattr(exc, "actual", None),
                    case=key,
                    witness=_scoped_witness(getattr(exc, "witness", None), exchange),
                )
            )
        except Unsupported as exc:
            findings.append(Finding(req.id, "unsupported", str(exc), case=key))
        except Exception as exc:  # the barrier: see the docstring
            name = getattr(req.check, "__qualname__", repr(req.check))
            message = f"suite defect: check {name} raised {type(exc).__name__}: {exc}"
            findings.append(Finding(req.id, "error", message, case=key))
        else:
            findings.append(Finding(req.id, "passed", case=key))
    return findings


def jsonable(value: Any) -> Any:
    """``value`` as stored in results.json: itself when it is small JSON, else its repr."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)[:VALUE_CHARS]
    return value if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


def evidence(exchange: Exchange) -> dict[str, Any]:
    """What a reader needs to see and reproduce one exchange, with secrets redacted."""
    case = exchange.case
    body_text = exchange.request_body.decode("utf-8", "replace")
    out: dict[str, Any] = {
        "case": case.label,
        "mode": case.mode,
        "breaks": case.breaks,
        "request": {
            "method": "POST",
            "url": exchange.url,
            "headers": exchange.request_headers,
            "body": body_text[:EXCERPT_CHARS],
        },
        "status": exchange.status,
        "response_headers": exchange.headers.to_dict(),
        "body_excerpt": exchange.body[:EXCERPT_CHARS].decode("utf-8", "replace"),
        "transport_error": exchange.transport_error,
        "elapsed": round(exchange.elapsed, 4),
        "curl": curl_command(exchange),
    }
    if exchange.notes:  # what the client did about it (sent again alone, reconnected...)
        out["notes"] = list(exchange.notes)
    if exchange.events is not None:
        out["transcript"] = [
            {"at": round(ev.at, 4), "data": ev.data[:500]}
            for ev in exchange.events[:TRANSCRIPT_EVENTS]
        ]
        out["events"] = len(exchange.events)
        out["stream_error"] = exchange.stream_error
    return out


def curl_command(exchange: Exchange) -> str:
    """A shell command that replays the request; the key is read from the environment."""
    parts = ["curl", "-sS", "-N", "-X", "POST", shlex.quote(exchange.url)]
    for name, value in exchange.request_headers.items():
        if name.lower() == "authorization" and exchange.case.auth == "default":
            value = "Bearer $CONFORMANCE_API_KEY"
            parts += ["-H", f'"{name}: {value}"']
            continue
        parts += ["-H", shlex.quote(f"{name}: {value}")]
    parts += ["--data-binary", shlex.quote(exchange.request_body.decode("utf-8", "replace"))]
    return " ".join(parts)


@dataclass
class Tally:
    """How one requirement fared over a run.

    ``fingerprints`` holds the distinct fingerprints of its failures (sorted, at most
    MAX_FINGERPRINTS; ``fingerprints_dropped`` counts the others): what ``--baseline``,
    merge and compare tell apart. ``errored`` counts exchanges on which the check itself
    raised (a suite defect).
    """

    id: str
    level: str
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
    examples: list[dict[str, Any]] = field(default_factory=list)
    #: Failures resting on a witness (conformance.attribution): witness -> fingerprint -> n.
    witnessed: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Why failures were withheld (conformance.attribution), one line each.
    not_judged: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.errored:
            return "error"
        if self.failed:
            return "failed"
        if self.unsupported:
            return "unsupported"
        return "passed" if self.checked else "not-tested"

    def add_fingerprints(self, prints: list[str], dropped: int = 0) -> None:
        """Fold in failing fingerprints, keeping the first MAX_FINGERPRINTS in sort order."""
        union = sorted(set(self.fingerprints) | set(prints))
        self.fingerprints = union[:MAX_FINGERPRINTS]
        self.fingerprints_dropped += dropped + len(union) - len(self.fingerprints)

    def add_example(self, example: dict[str, Any]) -> None:
        """Keep ``example`` unless there are enough, or one of the same fingerprint is kept."""
        fp = example.get("fingerprint")
        if len(self.examples) >= MAX_EXAMPLES:
            return
        if fp and any(ex.get("fingerprint") == fp for ex in self.examples):
            return
        self.examples.append(example)


#: How bad each capability outcome is: merging two observations keeps the worse.
CAPABILITY_OUTCOMES = ("offered", "declined", "ignored", "broken")


@dataclass
class Results:
    """Everything a run found, per requirement, plus what it spent.

    ``capabilities`` is the capability table, feature -> ``{"outcome", "detail"}``, filled
    by the single-feature probes of conformance.capabilities (never by generated requests).
    """

    tallies: dict[str, Tally] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    spent: dict[str, float] = field(
        default_factory=lambda: {"requests": 0, "tokens": 0, "retries": 0}
    )
    capabilities: dict[str, dict[str, str]] = field(default_factory=dict)
    latency: list[dict[str, Any]] = field(default_factory=list)
    #: What the verdict depends on besides the tallies (conformance.judging.record).
    run_record: RunRecord = field(default_factory=RunRecord)

    @classmethod
    def for_requirements(cls, requirements: list[Requirement]) -> Results:
        return cls(
            tallies={
                r.id: Tally(
                    r.id,
                    r.level.value,
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
            self.spent["requests"] += 1 + exchange.retries
            self.spent["retries"] += exchange.retries
            self.spent["tokens"] += tokens_used(exchange)
        shown = None
        key = case_key(exchange.case)
        for f in findings:
            if not f.case:  # a finding made without its case: the exchange names it
                f = replace(f, case=key)
            tally = self.tallies[f.requirement]
            tally.checked += 1
            if f.outcome == "unsupported":
                tally.unsupported += 1
            elif f.outcome == "failed":
                tally.failed += 1
                tally.add_fingerprints([f.fingerprint])
                if f.witness:
                    prints = tally.witnessed.setdefault(f.witness, {})
                    prints[f.fingerprint] = prints.get(f.fingerprint, 0) + 1
            elif f.outcome == "error":
                tally.errored += 1
            if f.outcome != "passed":
                shown = shown or evidence(exchange)
                tally.add_example(
                    {
                        "message": f.message,
                        "outcome": f.outcome,
                        "fingerprint": f.fingerprint,
                        "path": f.path,
                        "expected": jsonable(f.expected),
                        "actual": jsonable(f.actual),
                        **shown,
                    }
                )

    def note_capability(self, feature: str, outcome: str, detail: str = "") -> None:
        """Enter one probe's outcome in the capability table; the worse of two stays."""
        if outcome not in CAPABILITY_OUTCOMES:
            raise ValueError(f"unknown capability outcome {outcome!r}")
        known = self.capabilities.get(feature)
        rank = CAPABILITY_OUTCOMES.index
        if known is None or rank(outcome) > rank(known.get("outcome", "offered")):
            self.capabilities[feature] = {"outcome": outcome, "detail": detail}

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
        for key, value in other.spent.items():
            self.spent[key] = self.spent.get(key, 0) + value
        for feature, entry in other.capabilities.items():
            self.note_capability(feature, entry["outcome"], entry.get("detail", ""))
        self.latency += other.latency
        self.run_record = self.run_record.absorb(other.run_record)
        observed: dict[str, int] = dict(self.meta.get(OBSERVED, {}))
        for status, n in other.meta.get(OBSERVED, {}).items():
            observed[status] = observed.get(status, 0) + int(n)
        # What attribution withheld in each part (a shard) stays evidence for the whole, and
        # so do the requests answered when sent again alone.
        withheld = [*self.meta.get(WITHHELD, []), *other.meta.get(WITHHELD, [])]
        alone = [*self.meta.get(SENT_ALONE, []), *other.meta.get(SENT_ALONE, [])]
        for key, value in other.meta.items():
            self.meta.setdefault(key, value)
        if withheld:
            self.meta[WITHHELD] = withheld
        if alone:
            self.meta[SENT_ALONE] = alone
        if observed:
            self.meta[OBSERVED] = dict(sorted(observed.items()))

    def failing(self, *, strict: bool = False, known: frozenset[str] = frozenset()) -> list[Tally]:
        """Requirements whose findings decide the verdict (SHOULD too under ``strict``).

        ``known`` holds the requirements already failing in a baseline: they do not decide.
        A requirement whose check raised (see :meth:`errors`) always decides: a suite defect
        must never end in a green run, whatever the level or the baseline.
        """
        levels = {Level.MUST.value} | ({Level.SHOULD.value} if strict else set())
        return [
            t
            for t in self.tallies.values()
            if t.errored or (t.failed and t.level in levels and t.id not in known)
        ]

    def errors(self) -> list[Tally]:
        """Requirements whose check raised on some exchange: the run's verdict is "error"."""
        return [t for t in self.tallies.values() if t.errored]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "meta": self.meta,
            "spent": self.spent,
            "requirements": [asdict(t) for t in self.tallies.values()],
            "capabilities": self.capabilities,
            "latency": self.latency,
            "latency_summary": latency_summary(self.latency, self.meta.get("concurrency")),
        } | ({} if self.run_record.blank else {"record": self.run_record.to_json()})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Results:
        if data.get("schema_version") != RESULTS_SCHEMA_VERSION:
            raise ValueError(
                f"results schema_version {data.get('schema_version')!r} is not "
                f"{RESULTS_SCHEMA_VERSION}"
            )
        meta = dict(data.get("meta", {}))
        record = data.get("record")
        return cls(
            tallies={t["id"]: Tally(**t) for t in data.get("requirements", [])},
            meta=meta,
            spent=dict(data.get("spent", {})),
            capabilities={k: dict(v) for k, v in data.get("capabilities", {}).items()},
            latency=list(data.get("latency", [])),
            # An older results.json kept no record: decide() reads its meta (RunRecord.from_meta).
            run_record=RunRecord() if record is None else RunRecord.from_json(record),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False)


#: The per-stream latency figures summarised over a run, and the percentiles shown.
LATENCY_FIGURES = {
    "ttfb_s": "time to first byte",
    "p50_gap_s": "inter-chunk gap (stream median)",
    "total_s": "total time per stream",
}
PERCENTILES = (50, 90, 99)


def latency_summary(entries: list[dict[str, Any]], concurrency: Any = None) -> dict[str, Any]:
    """p50/p90/p99 of time to first byte, inter-chunk gap and total time over the streams.

    The gap of a stream is its median gap between events, so one slow stream weighs as
    one stream. ``concurrency`` is the number of requests in flight they were measured at.
    """
    out: dict[str, Any] = {
        "streams": len(entries),
        "buffered": sum(1 for e in entries if e.get("buffered") is True),
        "concurrency": concurrency,
    }
    for key in LATENCY_FIGURES:
        values = [
            float(e[key])
            for e in entries
            if isinstance(e.get(key), int | float) and not isinstance(e.get(key), bool)
        ]
        out[key] = (
            {f"p{q}": round(percentile(values, q), 4) for q in PERCENTILES} if values else None
        )
    return out


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
