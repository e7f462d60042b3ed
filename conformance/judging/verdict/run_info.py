"""What a run says of itself besides its tallies, typed: results.json's ``meta`` object.

``RunInfo`` holds the run's identity and context (target, document, options), what the
run saw as it played (statuses answered, requests sent again alone, findings withheld by
attribution, the client's figures) and what the runner added at its end (wall time, the
baseline diff). The verdict itself is ``Results.verdict`` (conformance.judging.verdict.verdict),
written into the same object. Every field is typed; results.json stays the documented
serialisation (docs/results-schema.md): ``to_json`` writes exactly the keys that were set,
in the order they were first set (a file read back writes its keys in its own order), and
keys another writer added (``meta`` is open) travel along untouched in ``foreign``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from conformance.judging.requirements import Level

#: The keys of ``meta`` that hold the verdict (``Results.verdict``), in their order.
VERDICT_KEYS = ("verdict", "verdict_reasons", "coverage", "not_run")


@dataclass(frozen=True, slots=True)
class SpecNote:
    """An erratum applied, or a convention of the document read (``meta.errata`` and
    ``meta.conventions``)."""

    id: str
    title: str = ""
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "detail": self.detail}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SpecNote:
        return cls(str(data.get("id")), str(data.get("title", "")), str(data.get("detail", "")))


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """One entry of the registry in force (``meta.policies``): an erratum, a policy or a
    convention (conformance.judging.document.spec_notes.registry)."""

    kind: str
    id: str
    title: str = ""
    detail: str = ""
    switch: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "title": self.title,
            "detail": self.detail,
            "switch": self.switch,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RegistryEntry:
        return cls(
            str(data.get("kind", "")),
            str(data.get("id")),
            str(data.get("title", "")),
            str(data.get("detail", "")),
            str(data.get("switch", "")),
        )


@dataclass(frozen=True, slots=True)
class SentAlone:
    """A request that met a time-out or a cut beside other requests and was answered when
    sent again alone (not a finding); ``held_by`` names the request that held the target
    when one did (conformance/run/resend.py)."""

    case: str
    note: str
    held_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "note": self.note, "held_by": self.held_by}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SentAlone:
        held = data.get("held_by")
        return cls(str(data.get("case", "")), str(data.get("note", "")), held and str(held))


@dataclass(frozen=True, slots=True)
class Withheld:
    """Findings attribution withheld (conformance.judging.verdict.attribution): ``findings`` of
    ``requirement`` resting on ``witness``, shown wrong by ``shown_by`` or, when that is
    empty, never formed (``unformed`` says why)."""

    requirement: str
    witness: str
    shown_by: tuple[str, ...] = ()
    findings: int = 0
    unformed: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requirement": self.requirement,
            "witness": self.witness,
            "shown_by": list(self.shown_by),
            "findings": self.findings,
        }
        return out if self.unformed is None else {**out, "unformed": self.unformed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Withheld:
        unformed = data.get("unformed")
        return cls(
            str(data.get("requirement", "")),
            str(data.get("witness", "")),
            tuple(str(r) for r in data.get("shown_by") or ()),
            int(data.get("findings", 0)),
            None if unformed is None else str(unformed),
        )


@dataclass(frozen=True, slots=True)
class BaselineDiff:
    """Failure fingerprints of the current run relative to a baseline run, sorted
    (``meta.baseline``; computed by conformance.judging.verdict.baseline.compare_to_baseline).

    ``unverified`` holds baseline fingerprints of requirements the current run did not
    test (skipped by ``--checks``, out of budget): neither known nor fixed, since nothing
    was observed. ``new_failures`` is what the verdict reads: the requirements with at
    least one new fingerprint. ``file``: the baseline's path, once the runner says it.
    """

    known: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()
    new_failures: tuple[str, ...] = ()
    file: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The form stored in results.json (``meta.baseline``)."""
        out: dict[str, Any] = {
            "known": list(self.known),
            "new": list(self.new),
            "fixed": list(self.fixed),
            "unverified": list(self.unverified),
            "new_failures": list(self.new_failures),
        }
        return out if self.file is None else {**out, "file": self.file}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BaselineDiff:
        def ids(key: str) -> tuple[str, ...]:
            return tuple(str(x) for x in data.get(key) or ())

        file = data.get("file")
        return cls(
            ids("known"),
            ids("new"),
            ids("fixed"),
            ids("unverified"),
            ids("new_failures"),
            None if file is None else str(file),
        )


@dataclass(frozen=True, slots=True)
class Unobservable:
    """A requirement judged traffic cannot show (``meta.traffic.not_observable``)."""

    id: str
    level: Level
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "level": self.level.value, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Unobservable:
        return cls(str(data.get("id")), Level(str(data.get("level"))), str(data.get("reason", "")))


@dataclass(frozen=True, slots=True)
class TrafficCounts:
    """What a traffic judge saw (``meta.traffic``): exchanges seen, judged and not judged
    (by why), the entries it could not read, its own errors, what traffic cannot show."""

    seen: int = 0
    judged: int = 0
    unjudged: dict[str, int] = field(default_factory=dict)
    bad_entries: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    not_observable: tuple[Unobservable, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "seen": self.seen,
            "judged": self.judged,
            "unjudged": dict(self.unjudged),
            "bad_entries": list(self.bad_entries),
            "errors": list(self.errors),
            "not_observable": [u.to_json() for u in self.not_observable],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrafficCounts:
        return cls(
            seen=int(data.get("seen", 0)),
            judged=int(data.get("judged", 0)),
            unjudged={str(k): int(v) for k, v in (data.get("unjudged") or {}).items()},
            bad_entries=tuple(str(b) for b in data.get("bad_entries") or ()),
            errors=tuple(str(e) for e in data.get("errors") or ()),
            not_observable=tuple(
                Unobservable.from_json(u) for u in data.get("not_observable") or ()
            ),
        )


def _notes(value: Any) -> tuple[SpecNote, ...]:
    return tuple(SpecNote.from_json(e) for e in value or () if isinstance(e, Mapping))


#: How each typed field that is not a plain JSON value reads from results.json.
_READ: dict[str, Any] = {
    "errata": _notes,
    "conventions": _notes,
    "policies": lambda v: tuple(
        RegistryEntry.from_json(e) for e in v or () if isinstance(e, Mapping)
    ),
    "baseline_warnings": lambda v: tuple(str(w) for w in v or ()),
    "observed_statuses": lambda v: {str(k): int(n) for k, n in (v or {}).items()},
    "sent_alone": lambda v: tuple(SentAlone.from_json(e) for e in v or ()),
    "attribution": lambda v: tuple(Withheld.from_json(e) for e in v or ()),
    "baseline": lambda v: BaselineDiff.from_json(v) if isinstance(v, Mapping) else None,
    "client": lambda v: dict(v) if isinstance(v, Mapping) else None,
    "traffic": lambda v: TrafficCounts.from_json(v) if isinstance(v, Mapping) else None,
    "skipped_scenarios": lambda v: tuple(dict(e) for e in v or () if isinstance(e, Mapping)),
    "options": lambda v: (
        {str(k): dict(o) for k, o in v.items() if isinstance(o, Mapping)}
        if isinstance(v, Mapping)
        else None
    ),
}


def _write(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return [_write(v) for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value


@dataclass(eq=False)
class RunInfo:
    """The run's context and what it saw, typed (results.json ``meta``, less the verdict).

    A field is in results.json when it was set (by the constructor when not None, by
    assignment or :meth:`update` whatever its value), in the order it was first set.
    """

    # -- identity and the document judged (written when the run is assembled) ----------
    target: str | None = None
    spec: str | None = None
    spec_title: str | None = None
    spec_source: str | None = None
    spec_sha256: str | None = None
    operation: str | None = None
    strict_spec: bool | None = None
    contract: str | None = None
    strict: bool | None = None
    suite_version: str | None = None
    errata: tuple[SpecNote, ...] | None = None
    policies: tuple[RegistryEntry, ...] | None = None
    conventions: tuple[SpecNote, ...] | None = None
    model: str | None = None
    seed: int | None = None
    max_examples: int | None = None
    max_tokens: int | None = None  # --max-tokens: the bound on max_tokens in requests
    fuzz: int | None = None
    concurrency: int | None = None
    #: ``meta.options``: every option that changes what is sent or how it is judged, by
    #: kind (``sent``, ``judged``) and option name (conformance/front/option_table.py).
    options: dict[str, dict[str, Any]] | None = None
    started: float | None = None
    baseline_warnings: tuple[str, ...] | None = None
    shard: str | None = None
    # -- what the run saw ---------------------------------------------------------------
    observed_statuses: dict[str, int] | None = None
    sent_alone: tuple[SentAlone, ...] | None = None
    wall_time: float | None = None
    source: str | None = None  # "traffic": judged traffic, not the suite's own requests
    attribution: tuple[Withheld, ...] | None = None
    baseline: BaselineDiff | None = None
    client: dict[str, int] | None = None
    traffic: TrafficCounts | None = None
    shards: int | None = None  # a merged run: how many shards it merges
    #: Written by suites before the run record (the scenarios not run): read, never written.
    skipped_scenarios: tuple[dict[str, Any], ...] | None = None
    #: Keys another writer added to ``meta`` (it is open): kept, written back, never read.
    foreign: dict[str, Any] = field(default_factory=dict)
    #: The keys set, in the order first set (results.json writes them so).
    _order: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        order = [name for name in _FIELDS if getattr(self, name) is not None]
        object.__setattr__(self, "_order", order + list(self.foreign))

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        order: list[str] | None = self.__dict__.get("_order")
        if order is not None and name in _FIELDS and name not in order:
            order.append(name)

    # -- set and read ---------------------------------------------------------------------

    def update(self, **values: Any) -> None:
        """Set each field named (in the order given, as ``dict.update`` would)."""
        for name, value in values.items():
            if name not in _FIELDS:
                raise TypeError(f"RunInfo has no field {name!r}")
            setattr(self, name, value)

    def unset(self, name: str) -> None:
        """Leave ``name`` out of results.json again (its value becomes None)."""
        object.__setattr__(self, name, None)
        if name in self._order:
            self._order.remove(name)

    def is_set(self, name: str) -> bool:
        return name in self._order

    def mark(self, name: str) -> None:
        """Place a key held elsewhere (the verdict's) at this point of the order."""
        if name not in self._order:
            self._order.append(name)

    def absorb(self, other: RunInfo) -> None:
        """Fold in another part of the run (an item's, a worker's, a shard's): what this
        one has not set it takes from ``other``; the statuses answered are summed, the
        requests sent alone and the findings withheld kept from both."""
        observed = dict(self.observed_statuses or {})
        for status, n in (other.observed_statuses or {}).items():
            observed[status] = observed.get(status, 0) + n
        withheld = (*(self.attribution or ()), *(other.attribution or ()))
        alone = (*(self.sent_alone or ()), *(other.sent_alone or ()))
        for name in other._order:
            if name in self._order:
                continue
            if name in other.foreign:
                self.foreign[name] = other.foreign[name]
                self._order.append(name)
            elif name in _FIELDS:
                setattr(self, name, getattr(other, name))
            else:
                self._order.append(name)  # the verdict's place
        if withheld:
            self.attribution = withheld
        if alone:
            self.sent_alone = alone
        if observed:
            self.observed_statuses = dict(sorted(observed.items()))

    def taken_with(self) -> dict[str, Any]:
        """What a --baseline taken from this run records it was taken with."""
        keys = (
            "spec",
            "model",
            "target",
            "seed",
            "max_examples",
            "fuzz",
            "suite_version",
            "options",
        )
        return {key: getattr(self, key) for key in keys if self.is_set(key)}

    # -- results.json ---------------------------------------------------------------------

    def to_json(self, verdict: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """results.json's ``meta``: the keys set, in order, with ``verdict``'s keys (the
        verdict's, VERDICT_KEYS) at the place they were first written."""
        verdict = dict(verdict or {})
        out: dict[str, Any] = {}
        for name in self._order:
            if name in _FIELDS:
                out[name] = _write(getattr(self, name))
            elif name in self.foreign:
                out[name] = self.foreign[name]
            elif name in verdict:
                out[name] = verdict.pop(name)
        return out | verdict

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunInfo:
        """results.json's ``meta`` read back typed (the verdict's keys: Verdict.from_json)."""
        info = cls()
        for key, value in data.items():
            if key in _FIELDS:
                read = _READ.get(key)
                setattr(info, key, read(value) if read else value)
            elif key in VERDICT_KEYS:
                info.mark(key)
            else:
                info.foreign[key] = value
                info.mark(key)
        return info


_FIELDS = tuple(f.name for f in fields(RunInfo) if f.name not in ("foreign", "_order"))


def sent_alone_of(entries: Iterable[SentAlone]) -> list[str]:
    """The requests that held the target, each named once, sorted."""
    return sorted({e.held_by for e in entries if e.held_by})
