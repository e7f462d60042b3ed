"""Findings and their tally per requirement: what the reports read, never recompute.

``evaluate`` judges one exchange by every requirement that applies to it. A ``Results``
object tallies the findings per requirement, keeps the first few failing examples with
their evidence, and round-trips through JSON so that pytest-xdist workers, CI shards and
earlier runs (``--baseline``) can be merged into one verdict.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from conformance.exchange import Exchange, SSEEvent
from conformance.requirements import Context, Level, Requirement, Unsupported, Violation
from conformance.spec import Spec

RESULTS_SCHEMA_VERSION = 1
#: Results.meta key: how often each status code was answered (status as a string).
OBSERVED = "observed_statuses"
MAX_EXAMPLES = 3
EXCERPT_CHARS = 2000
TRANSCRIPT_EVENTS = 40


@dataclass(frozen=True, slots=True)
class Finding:
    """The outcome of one requirement on one exchange."""

    requirement: str
    outcome: str  # "passed" | "failed" | "unsupported"
    message: str = ""


def evaluate(
    requirements: list[Requirement],
    spec: Spec,
    exchange: Exchange,
    related: tuple[Exchange, ...] = (),
) -> list[Finding]:
    """Judge ``exchange`` by every requirement that applies to it."""
    ctx = Context(exchange.case, exchange, spec, related)
    findings = []
    for req in requirements:
        # When the SDK gave up mid-answer, the rest was never read: only the SDK
        # requirements may judge such an exchange (the suite's own client judges its twin).
        if exchange.cut_short_by_sdk and req.area != "sdk":
            continue
        if not req.applies(ctx):
            continue
        try:
            req.check(ctx)
        except Violation as exc:
            findings.append(Finding(req.id, "failed", str(exc)))
        except Unsupported as exc:
            findings.append(Finding(req.id, "unsupported", str(exc)))
        else:
            findings.append(Finding(req.id, "passed"))
    return findings


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
    """How one requirement fared over a run."""

    id: str
    level: str
    area: str
    statement: str
    source: str
    checked: int = 0
    failed: int = 0
    unsupported: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.failed:
            return "failed"
        if self.unsupported:
            return "unsupported"
        return "passed" if self.checked else "not-tested"


@dataclass
class Results:
    """Everything a run found, per requirement, plus what it spent."""

    tallies: dict[str, Tally] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    spent: dict[str, float] = field(
        default_factory=lambda: {"requests": 0, "tokens": 0, "retries": 0}
    )
    capabilities: dict[str, dict[str, int]] = field(default_factory=dict)
    latency: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def for_requirements(cls, requirements: list[Requirement]) -> Results:
        return cls(
            tallies={
                r.id: Tally(r.id, r.level.value, r.area, r.statement, r.source)
                for r in requirements
            }
        )

    def record(self, exchange: Exchange, findings: list[Finding]) -> None:
        """Tally the findings of one exchange and count what it cost."""
        self.spent["requests"] += 1 + exchange.retries
        self.spent["retries"] += exchange.retries
        self.spent["tokens"] += tokens_used(exchange)
        shown = None
        for f in findings:
            tally = self.tallies[f.requirement]
            tally.checked += 1
            if f.outcome == "unsupported":
                tally.unsupported += 1
            if f.outcome == "failed":
                tally.failed += 1
            if f.outcome != "passed" and len(tally.examples) < MAX_EXAMPLES:
                shown = shown or evidence(exchange)
                tally.examples.append({"message": f.message, "outcome": f.outcome, **shown})
        if exchange.case.mode in ("valid", "edge") and exchange.case.tags:
            for feature in sorted(exchange.case.tags):
                self.note_capability(feature, capability_outcome(exchange, findings, feature))

    def note_capability(self, feature: str, outcome: str) -> None:
        """Count how the target treated a declared feature: honoured, rejected or broke."""
        counts = self.capabilities.setdefault(feature, {})
        counts[outcome] = counts.get(outcome, 0) + 1

    def merge(self, other: Results) -> None:
        """Fold another run's (a worker's, a shard's) results into this one."""
        for rid, theirs in other.tallies.items():
            mine = self.tallies.setdefault(
                rid,
                Tally(
                    **{
                        **asdict(theirs),
                        "checked": 0,
                        "failed": 0,
                        "unsupported": 0,
                        "examples": [],
                    }
                ),
            )
            mine.checked += theirs.checked
            mine.failed += theirs.failed
            mine.unsupported += theirs.unsupported
            room = MAX_EXAMPLES - len(mine.examples)
            mine.examples += theirs.examples[: max(room, 0)]
        for key, value in other.spent.items():
            self.spent[key] = self.spent.get(key, 0) + value
        for feature, counts in other.capabilities.items():
            for outcome, n in counts.items():
                self.capabilities.setdefault(feature, {})
                self.capabilities[feature][outcome] = self.capabilities[feature].get(outcome, 0) + n
        self.latency += other.latency
        observed: dict[str, int] = dict(self.meta.get(OBSERVED, {}))
        for status, n in other.meta.get(OBSERVED, {}).items():
            observed[status] = observed.get(status, 0) + int(n)
        for key, value in other.meta.items():
            self.meta.setdefault(key, value)
        if observed:
            self.meta[OBSERVED] = dict(sorted(observed.items()))

    def failing(self, *, strict: bool = False, known: frozenset[str] = frozenset()) -> list[Tally]:
        """Requirements whose failures decide the verdict (SHOULD too under ``strict``).

        ``known`` holds the requirements already failing in a baseline: they do not decide.
        """
        levels = {Level.MUST.value} | ({Level.SHOULD.value} if strict else set())
        return [
            t for t in self.tallies.values() if t.failed and t.level in levels and t.id not in known
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "meta": self.meta,
            "spent": self.spent,
            "requirements": [asdict(t) for t in self.tallies.values()],
            "capabilities": self.capabilities,
            "latency": self.latency,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Results:
        if data.get("schema_version") != RESULTS_SCHEMA_VERSION:
            raise ValueError(
                f"results schema_version {data.get('schema_version')!r} is not "
                f"{RESULTS_SCHEMA_VERSION}"
            )
        return cls(
            tallies={t["id"]: Tally(**t) for t in data.get("requirements", [])},
            meta=dict(data.get("meta", {})),
            spent=dict(data.get("spent", {})),
            capabilities={k: dict(v) for k, v in data.get("capabilities", {}).items()},
            latency=list(data.get("latency", [])),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False)


# The requirements that judge what a feature does, by requirement-ID prefix: a failure
# of one of them breaks the feature; a failure elsewhere (an empty `id`, say) does not.
FEATURE_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "param:n": ("CHOICES-", "STREAM-INDEXES"),
    "param:best_of": ("CHOICES-", "USAGE-MAX-TOKENS"),
    "param:max_tokens": ("USAGE-MAX-TOKENS", "FINISH-LENGTH", "STREAM-MAX-TOKENS"),
    "param:echo": ("ECHO-", "STREAM-ECHO"),
    "param:logprobs": ("LOGPROBS-", "STREAM-LOGPROBS"),
    "param:stop": ("STOP-", "STREAM-STOP"),
    "param:stream": ("STREAM-",),
    "param:stream_options": ("STREAM-USAGE",),
    "prompt:": ("CHOICES-",),
}


def capability_outcome(exchange: Exchange, findings: list[Finding], feature: str) -> str:
    """How a valid request's feature fared: honoured, rejected (proper 4xx) or broke."""
    status = exchange.status
    if status is not None and 400 <= status < 500 and status != 429:
        return "rejected"
    if status != 200:
        return "broke"  # 5xx, another status, or no answer at all
    prefixes = next((v for k, v in FEATURE_REQUIREMENTS.items() if feature.startswith(k)), ())
    broken = any(f.outcome == "failed" and f.requirement.startswith(prefixes) for f in findings)
    return "broke" if broken else "honoured"


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
