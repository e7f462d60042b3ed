"""The one owner of a run's state: its context and its record, written through named methods.

``Results`` holds what a run says of itself in two typed objects: ``info`` (``RunInfo``,
results.json ``meta``: identity, context, what the run saw) and ``run_record``
(``RunRecord``, ``record``: what the verdict depends on besides the tallies). Every write
to either goes through a method of :class:`StateOwner`, which ``Results`` is, named for
what happened: the run began (``begin``), a shard was taken, a scenario was played, a
request was left unsent, a status was answered, attribution withheld findings, the run
ended, a baseline was compared, the runner saw an error. The judge core, the engine, the
plugin and the doors call these; none assigns to ``info`` or ``run_record`` itself
(tests and tools that build a Results by hand may set ``run_record``).

The run's identity (``IDENTITY``: spec, contract, target, model, seed, strict) is kept
once, in ``info``; the record shows it as its own (``run_record`` is the record kept,
with ``info``'s identity), so results.json writes it in both objects as it always did and
the two cannot disagree. A record handed in (``begin``, a shard's, the merge's combined
record, a results.json read back) brings its identity along: each of its identity fields
that says something (not empty, None or False) sets ``info``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from conformance.judging.verdict.record import RunRecord, ScenarioRun
from conformance.judging.verdict.run_info import (
    BaselineDiff,
    RunInfo,
    SentAlone,
    TrafficCounts,
    Withheld,
)

#: The record's fields that are the run's identity, kept in ``RunInfo`` alone.
IDENTITY = ("spec", "contract", "target", "model", "seed", "strict")
_NO_IDENTITY: dict[str, Any] = {name: getattr(RunRecord(), name) for name in IDENTITY}


def identity_of(info: RunInfo) -> dict[str, Any]:
    """The record's identity fields as ``info`` holds them (empty where it holds none)."""
    seed = info.seed
    return {
        "spec": info.spec or "",
        "contract": info.contract or "",
        "target": info.target or "",
        "model": info.model or "",
        "seed": seed if isinstance(seed, int) else None,
        "strict": bool(info.strict),
    }


def _says(value: Any) -> bool:
    return value is not None and value is not False and value != ""


class StateOwner:
    """The writes to a run's state (``info`` and the record), each a named method."""

    info: RunInfo
    #: The record without its identity (``info``'s); None: nothing was ever recorded.
    _record: RunRecord | None

    # -- the record, read and replaced ----------------------------------------------------

    @property
    def run_record(self) -> RunRecord:
        """What the verdict depends on besides the tallies (conformance.judging.verdict.record),
        with the run's identity; blank when nothing was ever recorded (an older results.json:
        decide() reads what it recorded instead)."""
        if self._record is None:
            return RunRecord()
        return replace(self._record, **identity_of(self.info))

    @run_record.setter
    def run_record(self, record: RunRecord) -> None:
        self.set_record(record)

    def set_record(self, record: RunRecord) -> None:
        """Keep ``record`` as the run's (the shards' combined record, one read back); its
        identity fields that say something set ``info``'s."""
        if record.blank:
            self._record = None
            return
        shown = identity_of(self.info)
        for name in IDENTITY:
            value = getattr(record, name)
            if _says(value) and value != shown[name]:
                setattr(self.info, name, value)
        self._record = replace(record, **_NO_IDENTITY)

    # -- the run begins ---------------------------------------------------------------------

    def begin(self, context: Mapping[str, Any], record: RunRecord) -> None:
        """The run's identity and context (RunInfo fields, in results.json's order) and the
        record it starts with."""
        self.info.update(**context)
        self.set_record(record)

    def note_shard(self, shard: str) -> None:
        """This process plays shard ``K/N`` of the run (``--shard``)."""
        self.info.shard = shard
        self.set_record(self.run_record.with_(shards=(shard,)))

    def note_options(self, options: Mapping[str, Mapping[str, Any]]) -> None:
        """The options that change what is sent or how it is judged, by kind and name
        (results.json ``meta.options``, conformance/front/option_table.py)."""
        self.info.options = {kind: dict(values) for kind, values in options.items()}

    def note_baseline_warnings(self, warnings: Iterable[str]) -> None:
        """What the --baseline differs in from this run (another model, target, seed...)."""
        self.info.baseline_warnings = tuple(warnings)

    # -- as it plays --------------------------------------------------------------------------

    def note_played(self, *runs: ScenarioRun) -> None:
        """Scenario items played (how each ended, what of it was not run and why)."""
        self.set_record(self.run_record.played(*runs))

    def note_unsent(self, note: str) -> None:
        """A request the budget left unsent; the first note is the run's."""
        record = self.run_record
        self.set_record(record.with_(budget=record.budget or note))

    def note_no_verdict(self, reason: str) -> None:
        """The target kept answering 429 (rate limited) past the retries allowed."""
        self.set_record(self.run_record.with_(no_verdict=reason))

    def note_status(self, status: int) -> None:
        """One answer of this HTTP status (results.json ``meta.observed_statuses``)."""
        statuses = self.info.observed_statuses
        if statuses is None:
            statuses = self.info.observed_statuses = {}
        statuses[str(status)] = statuses.get(str(status), 0) + 1

    def note_sent_alone(self, alone: SentAlone) -> None:
        """A request answered when sent again alone (conformance/run/resend.py)."""
        self.info.sent_alone = (*(self.info.sent_alone or ()), alone)

    def note_withheld(self, withheld: Sequence[Withheld]) -> None:
        """Findings attribution withheld (conformance.judging.verdict.attribution)."""
        if withheld:
            self.info.attribution = (*(self.info.attribution or ()), *withheld)

    def absorb_state(self, other: StateOwner) -> None:
        """Fold in the state of another part of the same run (an item's, a worker's, a
        shard's): RunRecord.absorb and RunInfo.absorb."""
        self.set_record(self.run_record.absorb(other.run_record))
        self.info.absorb(other.info)

    # -- at its end ---------------------------------------------------------------------------

    def note_ended(self, wall_time: float) -> None:
        """How long the run took, in seconds."""
        self.info.wall_time = wall_time

    def note_merged(self, shards: int, wall_time: float) -> None:
        """These Results fold ``shards`` shards (no longer one of them); the longest took
        ``wall_time``."""
        self.info.unset("shard")
        self.info.shards = shards
        self.info.wall_time = wall_time

    def note_traffic(self, counts: TrafficCounts) -> None:
        """What a traffic judge saw (results.json ``meta.traffic``)."""
        self.info.traffic = counts

    def note_client(self, figures: Mapping[str, int]) -> None:
        """The figures of the client that played the run (peak in flight, retries...)."""
        self.info.client = dict(figures)

    def note_baseline(self, diff: BaselineDiff, known: Iterable[str]) -> None:
        """The --baseline diff; ``known``: the requirements failing in the baseline, which
        fail no test unless they fail here with a new fingerprint (``diff.new_failures``)."""
        self.info.baseline = diff
        record = self.run_record
        self.set_record(
            record.with_(
                known_failures=tuple(sorted({*record.known_failures, *known})),
                baseline_new_failures=tuple(diff.new_failures),
            )
        )

    def note_errors(self, *errors: str) -> None:
        """What the runner saw break (a suite defect: the verdict is ``error``)."""
        record = self.run_record
        self.set_record(record.with_(errors=(*record.errors, *errors)))

    def note_interrupted(self, how: str) -> None:
        """How a Ctrl-C stopped the run."""
        self.set_record(self.run_record.with_(interrupted=how))
