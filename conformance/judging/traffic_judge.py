"""The judge of traffic: exchanges the suite did not send, judged as a run judges its own.

``completions-conformance judge`` feeds it recorded exchanges, the proxy the ones it
forwards. Every exchange goes through the judge core's one function
(conformance.judging.judge.judge_into) into the Results of its model; a :class:`Snapshot`
copies them and has the judge core's one wrap-up (conformance.judging.verdict.conclusion:
attribution, one defect, one finding, then ``decide()``) give the verdict, per model and
over all, whenever one is asked for.

Traffic holds only what its clients sent. A requirement that needs a request only the
suite sends (a probe, a pair of twin requests) or the openai SDK's view is *not
observable from traffic* (:data:`NOT_OBSERVABLE`, with the reason): never "passed". So
traffic's verdict is ``incomplete`` at best, naming those MUSTs, unless the input
exercised them (a transcript keeps the suite's own probe); ``failed`` when a MUST failed;
``error`` when the judge itself broke (a suite defect, shown, never hidden). Entries that
were not judged (unreadable, another operation, sampled out) are counted with why.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.judging.checks import load_checks
from conformance.judging.document.spec import Spec
from conformance.judging.document.spec_notes import document_meta, registry
from conformance.judging.judge import judge_into
from conformance.judging.requirements import REGISTRY, Requirement
from conformance.judging.verdict.conclusion import conclude
from conformance.judging.verdict.decision import applicability
from conformance.judging.verdict.latency import stream_latency
from conformance.judging.verdict.record import RunRecord, ScenarioOutcome, ScenarioRun, SkipCause
from conformance.judging.verdict.results import Finding, Results, Status, Tally
from conformance.judging.verdict.run_info import (
    RegistryEntry,
    SpecNote,
    TrafficCounts,
    Unobservable,
)
from conformance.judging.verdict.verdict import Verdict
from conformance.judging.version import VERSION
from conformance.judging.wire.exchange import Exchange
from conformance.judging.wire.traffic import BadEntry, Entry, Passed, Seen, exchange_of, model_of

#: What traffic cannot show, by what it would take: the requirements and why.
NOT_OBSERVABLE: dict[str, tuple[tuple[str, ...], str]] = {
    "unknown-model probe": (
        ("MODEL-NOT-FOUND", "MODEL-NOT-FOUND-404"),
        "needs a request for a model no target serves (the suite's probe); traffic cannot "
        "tell a model the target does not serve from one it does",
    ),
    "stop probe": (
        ("STOP-PROBE",),
        "needs a second request whose stop sequence is taken from the first one's answer",
    ),
    "n twin": (
        ("USAGE-PROMPT-TOKENS-N",),
        "needs the same prompt asked with n=1 and n=2 side by side (the suite's twin)",
    ),
    "stream twin": (
        ("STREAM-MATCHES-NONSTREAM", "STREAM-USAGE-MATCHES"),
        "needs the same request sent streamed and non-streamed side by side (the suite's twin)",
    ),
    "openai SDK": (
        ("SDK-COMPLETION", "SDK-STREAM"),
        "judges what the openai SDK made of the answer; the wire shows the bytes, not what "
        "a client parsed",
    ),
    "context window probe": (
        ("CONTEXT-WINDOW-REJECTED",),
        "needs the context window the target advertises (its model list, GET /v1/models) "
        "and a prompt one token over it; traffic shows neither",
    ),
    "health probe": (
        ("TARGET-ALIVE",),
        "needs the suite's health probe (its minimal request, sent after an answer only a "
        "dead target gives); an answer in traffic shows only that the target answered it",
    ),
}
#: Judged on traffic, these would pass on every answer without having been tested.
VACUOUS = frozenset({"TARGET-ALIVE"})
#: Requirement -> why traffic cannot show it.
UNOBSERVABLE: dict[str, str] = {
    rid: f"not observable from traffic: {why}"
    for ids, why in NOT_OBSERVABLE.values()
    for rid in ids
}
#: Bad entries kept for the reports (the rest are counted).
MAX_BAD_ENTRIES = 50


def exercised(tally: Tally | None) -> bool:
    """Whether some exchange judged the requirement (passed, failed or raised)."""
    return tally is not None and bool(tally.failed or tally.checked > tally.unsupported)


@dataclass
class Snapshot:
    """The verdict of the traffic judged so far: over all models and per model, each
    Results a copy with attribution applied and its verdict decided."""

    overall: Results
    verdict: Verdict
    models: dict[str, tuple[Results, Verdict]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The live verdict (the proxy's /_conformance/verdict.json, verdict.json beside
        the reports): over all models and per model, per requirement, with the evidence
        of each finding (redacted like every report)."""
        info = self.overall.info
        return {
            "target": info.target,
            "spec": info.spec,
            "started": info.started,
            "traffic": None if info.traffic is None else info.traffic.to_json(),
            **_verdict_json(self.verdict),
            "requirements": requirement_rows(self.overall, self.verdict),
            "models": {
                model: {
                    "exchanges": results.spent.requests,
                    **_verdict_json(verdict),
                    "requirements": requirement_rows(results, verdict),
                }
                for model, (results, verdict) in self.models.items()
            },
        }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    return {
        "verdict": verdict.word,
        "exit_code": verdict.exit_code,
        "reasons": list(verdict.reasons),
        "untested": [u.to_json() for u in verdict.coverage.untested],
    }


def requirement_rows(results: Results, verdict: Verdict) -> list[dict[str, Any]]:
    """One row per requirement: how it fared on the traffic, why when not judged (a MUST
    the verdict's coverage names not applicable says so, never "not tested"), and the
    evidence of its findings (the tally's examples)."""
    excused = {u.id: u.reason for u in verdict.coverage.not_applicable}
    rows = []
    for t in results.tallies.values():
        unseen = t.id in UNOBSERVABLE and not exercised(t)
        status, reason = t.status.value, ""
        if unseen:
            status, reason = "not-observable", UNOBSERVABLE[t.id]
        elif t.id in excused and t.status in (Status.NOT_TESTED, Status.UNSUPPORTED):
            status, reason = Status.NOT_APPLICABLE.value, excused[t.id]
        rows.append(
            {
                "id": t.id,
                "level": t.level.value,
                "area": t.area,
                "statement": t.statement,
                "status": status,
                "reason": reason,
                "checked": t.checked,
                "failed": t.failed,
                "unsupported": t.unsupported,
                "errored": t.errored,
                "not_judged": list(t.not_judged),
                "findings": [ex.to_json() for ex in t.examples],
            }
        )
    order = {"error": 0, "failed": 1, "unsupported": 2, "passed": 3}
    return sorted(rows, key=lambda r: (order.get(r["status"], 4), r["id"]))


class TrafficJudge:
    """Judges exchanges seen in traffic into one Results per model; thread-safe.

    ``target`` names where the traffic went (an upstream URL, the files read).
    """

    def __init__(
        self, spec: Spec, *, target: str, requirements: Sequence[Requirement] | None = None
    ) -> None:
        load_checks()
        self.spec = spec
        self.target = target
        # Each at the level the document and its contract give it, as in a run.
        chosen = REGISTRY.values() if requirements is None else requirements
        self.requirements = [r.under(spec) for r in chosen]
        self.judges = [r for r in self.requirements if r.id not in VACUOUS]
        self.run_id = secrets.token_hex(8)
        self.started = time.time()
        self._lock = threading.Lock()
        self._models: dict[str, Results] = {}
        self.seen = 0
        self.judged = 0
        self.unjudged: Counter[str] = Counter()
        self.bad_entries: list[str] = []
        self.errors: list[str] = []
        #: Called with each entry judged and its Exchange (the proxy's --har writes it).
        self.listeners: list[Callable[[Seen, Exchange], None]] = []

    # -- what comes in ------------------------------------------------------------------

    def judge(self, exchange: Exchange) -> list[Finding]:
        """Judge one exchange into its model's Results (conformance.judging.judge_into)."""
        model = model_of(exchange)
        with self._lock:
            results = self._models.get(model)
            if results is None:
                results = self._models[model] = Results.for_requirements(self.requirements)
            findings = judge_into(results, self.judges, self.spec, exchange)
            latency = stream_latency(exchange) if exchange.ttfb is not None else None
            if latency is not None:
                results.latency.append(latency)
            self.judged += 1
        return findings

    def take(self, entry: Entry) -> str | None:
        """Judge one entry as read or forwarded; the line to show when it went wrong.

        A Passed entry is counted, a BadEntry noted; a Seen is built into its Exchange
        (redacted) and judged. A judge that raises is a suite defect: noted (the verdict
        is then ``error``) and never raised, so the traffic and the other entries go on.
        """
        self.note_seen()
        if isinstance(entry, Passed):
            self.note_unjudged(entry.reason)
            return None
        try:
            if isinstance(entry, BadEntry):
                raise entry
            exchange = exchange_of(self.spec, entry)
            self.judge(exchange)
            for listener in self.listeners:
                listener(entry, exchange)
        except BadEntry as bad:
            self.note_bad(str(bad))
            return str(bad)
        except Exception as exc:  # the barrier: a broken judge must not stop the traffic
            where = entry.where
            line = f"suite error: the judge failed on {where}: {type(exc).__name__}: {exc}"
            self.note_error(line)
            return line
        return None

    def note_seen(self, n: int = 1) -> None:
        with self._lock:
            self.seen += n

    def note_unjudged(self, reason: str, n: int = 1) -> None:
        """Exchanges passed without being judged (sampled out, another operation...)."""
        with self._lock:
            self.unjudged[reason] += n

    def note_bad(self, line: str) -> None:
        """An entry that could not be read (BadEntry's line): counted, the first few kept."""
        with self._lock:
            self.unjudged["unreadable"] += 1
            if len(self.bad_entries) < MAX_BAD_ENTRIES:
                self.bad_entries.append(line)

    def note_error(self, line: str) -> None:
        """The judge itself failed on an exchange: a suite defect, and the verdict is error."""
        with self._lock:
            if len(self.errors) < MAX_BAD_ENTRIES:
                self.errors.append(line)

    # -- what goes out ------------------------------------------------------------------

    def snapshot(self, elsewhere: Mapping[str, int] | None = None) -> Snapshot:
        """The verdict now: copies of the Results, attributed and decided. ``elsewhere``:
        exchanges passed without ever reaching this judge, by why (the proxy's forwarding
        process counts those it did not copy)."""
        with self._lock:
            copies = {m: Results.from_json(r.to_json()) for m, r in sorted(self._models.items())}
            errors, bad = tuple(self.errors), list(self.bad_entries)
            unjudged = self.unjudged + Counter(elsewhere or {})
            counts = TrafficCounts(
                seen=self.seen + sum((elsewhere or {}).values()),
                judged=self.judged,
                unjudged=dict(unjudged),
            )
        overall = Results.for_requirements(self.requirements)
        for results in copies.values():
            overall.merge(results)
        models = {}
        for model, results in copies.items():
            models[model] = (results, self._decide(results, [model], errors, bad, counts))
        verdict = self._decide(overall, list(copies), errors, bad, counts)
        return Snapshot(overall, verdict, models)

    def _decide(
        self,
        results: Results,
        models: list[str],
        errors: tuple[str, ...],
        bad: list[str],
        counts: TrafficCounts,
    ) -> Verdict:
        def settle(attributed: Results) -> None:
            # What traffic records reads the attributed tallies: what they exercised.
            attributed.begin(self._header(models), self._record(attributed))
            attributed.note_traffic(
                TrafficCounts(
                    seen=counts.seen,
                    judged=counts.judged,
                    unjudged=counts.unjudged,
                    bad_entries=tuple(bad),
                    errors=tuple(errors),
                    not_observable=tuple(
                        Unobservable(rid, t.level, UNOBSERVABLE[rid])
                        for rid, t in attributed.tallies.items()
                        if rid in UNOBSERVABLE and not exercised(t)
                    ),
                )
            )

        return conclude(results, settle=settle, errors=errors)

    def _record(self, results: Results) -> RunRecord:
        """The record of judged traffic (its identity is the context's, ``_header``): the
        registry under the document, and the MUSTs traffic left unseen as not observable."""
        selected = {r.id for r in self.requirements}
        allowed = applicability(self.spec, lambda rid: rid in selected)
        musts = set(allowed["musts"]) - set(allowed["not_applicable"]) - set(allowed["deselected"])
        unseen = []
        for name, (ids, why) in NOT_OBSERVABLE.items():
            covers = tuple(i for i in ids if i in musts and not exercised(results.tallies.get(i)))
            if covers:
                reason = f"not observable from traffic: {why}"
                unseen.append(
                    ScenarioRun(
                        f"traffic: {name}",
                        ScenarioOutcome.SKIPPED,
                        SkipCause.NOT_OBSERVABLE,
                        reason,
                        covers,
                    )
                )
        return RunRecord(run_id=self.run_id, scenarios=tuple(unseen), **allowed)

    def _header(self, models: list[str]) -> dict[str, Any]:
        """The RunInfo fields of judged traffic, in results.json's order."""
        spec = self.spec
        return {
            "target": self.target,
            **document_meta(spec),
            "strict": False,
            "suite_version": VERSION,
            "errata": tuple(SpecNote(e.id, e.title, e.detail) for e in spec.errata),
            "policies": tuple(RegistryEntry(**entry) for entry in registry(spec)),
            "conventions": tuple(SpecNote(c.id, c.title, c.detail) for c in spec.conventions),
            "model": ", ".join(models),
            "started": self.started,
            "wall_time": round(time.time() - self.started, 3),
            "source": "traffic",
        }
