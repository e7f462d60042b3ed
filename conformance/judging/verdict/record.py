"""The run record: everything the verdict depends on, typed, and how records combine.

A ``RunRecord`` travels inside ``Results`` (``Results.run_record``, ``"record"`` in
results.json), so a pytest-xdist worker's items, a CI shard and an earlier run read back
with the same types they were written with; there its identity (spec, contract, target,
model, seed, strict) is the run's ``RunInfo``'s, kept once (conformance.judging.verdict.state).
``decide`` (conformance.judging.verdict.decision) reads nothing else: no option, shard,
budget or baseline reaches the verdict except through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from conformance.judging.exceptions import ConformanceError


class SkipCause(StrEnum):
    """Why a scenario, or part of one, was not run."""

    # the spec does not declare (or admit) the feature, or the target advertises nothing to
    # probe (no context window in /v1/models)
    NOT_DECLARED = "not-declared"
    DESELECTED = "deselected"  # deselected, or an opt-in that was not asked for
    BUDGET = "budget"  # the request or token budget ran out first
    UNAVAILABLE = "unavailable"  # the suite lacks what it needs (a generator, the SDK)
    # No API key was given: the target answered the preflight without one (or the run could
    # not have started), so it is run open by its operator's choice, and a 200 to a request
    # without credentials proves nothing. A stated reason, as the README says.
    NO_KEY = "no-key"
    TARGET = "target"  # the target's answers left nothing to probe
    # The target answered legally, but too little to build a probe on (a tiny model's
    # answer of one word, or of bytes that are not UTF-8), after the probe tried other
    # prompts: a stated reason, not the suite's shortfall.
    SHORT_ANSWER = "short-answer"
    RATE_LIMITED = "rate-limited"  # the target kept answering 429
    # A probe that could cost more tokens than the run may spend (the context window probe
    # of a 128k model against the default --budget-tokens): stated before anything is
    # sent, and lifted by raising the budget; not an accident of the run like BUDGET.
    COST = "cost"
    # Judged traffic (completions-conformance judge, proxy) holds no exchange that can show
    # it: it needs a request only the suite sends (a probe, a twin) or the SDK's view.
    NOT_OBSERVABLE = "not-observable"


class ScenarioOutcome(StrEnum):
    """How one played scenario item ended, in a test runner's words (``ScenarioRun.outcome``)."""

    PASSED = "passed"
    FAILED = "failed"  # a requirement that decides the verdict failed
    SKIPPED = "skipped"  # nothing was judged: ``ScenarioRun.cause`` says why
    ERROR = "error"  # the scenario itself raised: a defect of the suite


#: The only reasons a scenario may go unrun in a run that passes.
EXCUSED = frozenset(
    {
        SkipCause.NOT_DECLARED,
        SkipCause.DESELECTED,
        SkipCause.NO_KEY,
        SkipCause.COST,
        SkipCause.SHORT_ANSWER,
    }
)


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    """One played scenario item: how it ended, and what of it was not run and why.

    ``cause`` is set when the item was skipped (``reason`` says why, ``covers`` names the
    requirements it would have judged) or cut short (``unsent`` cases not sent).
    """

    id: str
    outcome: ScenarioOutcome
    cause: SkipCause | None = None
    reason: str = ""
    covers: tuple[str, ...] = ()
    unsent: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", ScenarioOutcome(self.outcome))

    @property
    def excused(self) -> bool:
        """Whether what it left unrun may stand in a passed run."""
        return self.cause is None or self.cause in EXCUSED

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome.value,
            "cause": None if self.cause is None else self.cause.value,
            "reason": self.reason,
            "covers": list(self.covers),
            "unsent": self.unsent,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScenarioRun:
        cause = data.get("cause")
        return cls(
            id=str(data["id"]),
            outcome=ScenarioOutcome(data.get("outcome", "passed")),
            cause=None if cause is None else SkipCause(cause),
            reason=str(data.get("reason", "")),
            covers=tuple(data.get("covers", ())),
            unsent=int(data.get("unsent", 0)),
        )


class ShardMismatch(ConformanceError):
    """Results that are not the shards of one run, each exactly once (conformance-merge)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What the verdict of one run (or of its merged shards) depends on, besides the tallies.

    Identity: ``run_id`` (one per process that assembled a run), ``shards`` (``K/N`` of
    each shard folded in; empty for a whole run), ``seed``, ``spec``, ``target``, ``model``.
    What was asked: ``strict`` (SHOULD decides), ``require_capabilities``, the requirement
    selection (``deselected``), ``known_failures`` and ``baseline_new_failures`` (--baseline).
    What the spec allows: ``musts`` (every registered MUST) and ``not_applicable`` (MUSTs the
    spec cannot carry, with the reason). What happened: ``scenarios``, ``budget`` (the first
    budget note seen), ``no_verdict`` (rate limited), ``errors`` (what the runner saw break),
    ``interrupted`` (how a Ctrl-C stopped it).
    """

    run_id: str = ""
    shards: tuple[str, ...] = ()
    seed: int | None = None
    spec: str = ""
    contract: str = ""
    target: str = ""
    model: str = ""
    strict: bool = False
    require_capabilities: tuple[str, ...] = ()
    musts: tuple[str, ...] = ()
    not_applicable: dict[str, str] = field(default_factory=dict)
    deselected: tuple[str, ...] = ()
    known_failures: tuple[str, ...] = ()
    baseline_new_failures: tuple[str, ...] | None = None
    scenarios: tuple[ScenarioRun, ...] = ()
    budget: str | None = None
    no_verdict: str | None = None
    errors: tuple[str, ...] = ()
    interrupted: str | None = None

    # -- what happened, folded in as it happens ---------------------------------------------

    def played(self, *runs: ScenarioRun) -> RunRecord:
        return replace(self, scenarios=(*self.scenarios, *runs))

    def with_(self, **changes: Any) -> RunRecord:
        return replace(self, **changes)

    def absorb(self, other: RunRecord) -> RunRecord:
        """This process's record with another part of the same run folded in (an item's,
        an xdist worker's, a shard's): its scenarios added, the first budget note, rate
        limit and interruption kept."""
        return replace(
            self,
            scenarios=(*self.scenarios, *other.scenarios),
            budget=self.budget or other.budget,
            no_verdict=self.no_verdict or other.no_verdict,
            errors=(*self.errors, *other.errors),
            interrupted=self.interrupted or other.interrupted,
        )

    def unrun(self) -> list[ScenarioRun]:
        """Scenario items that left something unrun for a reason a pass cannot excuse."""
        return [s for s in self.scenarios if not s.excused]

    @property
    def blank(self) -> bool:
        """Whether nothing was ever recorded (Results built by hand, or read from a
        results.json written before records): conformance.judging.verdict.verdict.recorded_record
        stands in."""
        return self == RunRecord()

    # -- results.json --------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "shards": list(self.shards),
            "seed": self.seed,
            "spec": self.spec,
            "contract": self.contract,
            "target": self.target,
            "model": self.model,
            "strict": self.strict,
            "require_capabilities": list(self.require_capabilities),
            "musts": list(self.musts),
            "not_applicable": dict(self.not_applicable),
            "deselected": list(self.deselected),
            "known_failures": list(self.known_failures),
            "baseline_new_failures": None
            if self.baseline_new_failures is None
            else list(self.baseline_new_failures),
            "scenarios": [s.to_json() for s in self.scenarios],
            "budget": self.budget,
            "no_verdict": self.no_verdict,
            "errors": list(self.errors),
            "interrupted": self.interrupted,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        new = data.get("baseline_new_failures")
        seed = data.get("seed")
        return cls(
            run_id=str(data.get("run_id", "")),
            shards=tuple(str(s) for s in data.get("shards", ())),
            seed=None if seed is None else int(seed),
            spec=str(data.get("spec", "")),
            contract=str(data.get("contract", "")),
            target=str(data.get("target", "")),
            model=str(data.get("model", "")),
            strict=bool(data.get("strict", False)),
            require_capabilities=tuple(data.get("require_capabilities", ())),
            musts=tuple(data.get("musts", ())),
            not_applicable={str(k): str(v) for k, v in data.get("not_applicable", {}).items()},
            deselected=tuple(data.get("deselected", ())),
            known_failures=tuple(data.get("known_failures", ())),
            baseline_new_failures=None if new is None else tuple(new),
            scenarios=tuple(ScenarioRun.from_json(s) for s in data.get("scenarios", ())),
            budget=data.get("budget"),
            no_verdict=data.get("no_verdict"),
            errors=tuple(data.get("errors", ())),
            interrupted=data.get("interrupted"),
        )


#: What every shard of one run must agree on.
SAME = ("spec", "contract", "target", "model", "strict", "require_capabilities")


def _parse_shard(name: str, shard: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise ShardMismatch(f"{name}: shard {shard!r} is not K/N") from None
    return k, n


def combine_shards(records: Sequence[tuple[str, RunRecord]]) -> RunRecord:
    """The record of the whole run from its shards' records; ShardMismatch unless they are
    the shards of one run, each exactly once.

    Mixed seeds are refused, not warned about: each shard draws the generated cases of its
    seed and keeps its slice, so slices of different seeds are not one run's cases (some
    drawn twice, others never) and the merged verdict would not be the unsharded run's.
    """
    if not records:
        raise ShardMismatch("no results to merge")
    names = [name for name, _ in records]
    for key in (*SAME, "seed"):
        values = {name: getattr(r, key) for name, r in records}
        if len({repr(v) for v in values.values()}) > 1:
            listed = ", ".join(f"{name}: {v!r}" for name, v in values.items())
            label = "seeds" if key == "seed" else f"{key}s"
            raise ShardMismatch(f"the shards are of different {label} ({listed})")
    ids = [r.run_id for _, r in records]
    twice = sorted({n for n, i in zip(names, ids, strict=True) if i and ids.count(i) > 1})
    if twice:
        raise ShardMismatch(f"the same run given twice: {', '.join(twice)}")
    shards = [(name, s) for name, r in records for s in r.shards]
    if shards and len(shards) != len(records):
        bare = [name for name, r in records if not r.shards]
        raise ShardMismatch(f"not a shard of the run: {', '.join(bare)}")
    if shards:
        parsed = [_parse_shard(name, s) for name, s in shards]
        counts = {n for _, n in parsed}
        if len(counts) > 1:
            listed = ", ".join(f"{name}: {s}" for name, s in shards)
            raise ShardMismatch(f"the shards are of different shard counts ({listed})")
        total = counts.pop()
        seen = [k for k, _ in parsed]
        doubled = sorted({k for k in seen if seen.count(k) > 1})
        missing = [k for k in range(1, total + 1) if k not in seen]
        if doubled:
            raise ShardMismatch(f"shard {', '.join(f'{k}/{total}' for k in doubled)} given twice")
        if missing:
            raise ShardMismatch(f"shard {', '.join(f'{k}/{total}' for k in missing)} missing")
    elif len(records) > 1:
        raise ShardMismatch(
            "these are whole runs, not shards of one run (run each with --shard K/N)"
        )
    first = records[0][1]
    musts = dict.fromkeys(first.musts)
    deselected = set(first.deselected)
    not_applicable = dict(first.not_applicable)
    known = set(first.known_failures)
    merged = first
    for _, r in records[1:]:
        deselected &= set(r.deselected)  # selected in one shard: selected in the whole
        not_applicable.update(r.not_applicable)
        known &= set(r.known_failures)
        musts.update(dict.fromkeys(r.musts))
        merged = merged.absorb(r)
    return replace(
        merged,
        run_id="+".join(i for i in ids if i),
        shards=tuple(s for _, s in shards),
        musts=tuple(musts),
        deselected=tuple(sorted(deselected)),
        not_applicable=not_applicable,
        known_failures=tuple(sorted(known)),
        baseline_new_failures=None,
    )


def scenario_names(runs: Iterable[ScenarioRun]) -> str:
    """``a, b (and 3 more)``: the scenarios a reason names."""
    ids = [r.id for r in runs]
    shown = ", ".join(ids[:6])
    return shown + (f" (and {len(ids) - 6} more)" if len(ids) > 6 else "")
