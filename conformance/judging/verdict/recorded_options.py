"""The options a run recorded (results.json ``meta.options``), told apart from another run's.

A run records every option that changes what it sends (``sent``: ``--max-tokens``,
``--vocab-size``, the budgets...) or how the answers are judged and the verdict decided
(``judged``: ``--contract``, ``--strict-spec``, ``--strict-should``, the selection, the
bounds on an answer), by option name, with the value it used; which options those are is
the table's (conformance/front/option_table.py). ``--baseline`` names each option whose
value differs between the baseline and this run (conformance.judging.verdict.baseline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: ``meta.options`` kinds: what is sent, how it is judged.
SENT = "sent"
JUDGED = "judged"
KINDS = (SENT, JUDGED)


def shown(value: Any) -> str:
    """A recorded value as a command line would give it: ``8``, ``document``, ``on``,
    ``RESP-ID,STOP-ABSENT``; ``unset`` for none."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "unset"
    return "unset" if value is None or value == "" else str(value)


def differences(
    mine: Mapping[str, object], theirs: Mapping[str, object], kind: str, skip: Iterable[str] = ()
) -> list[str]:
    """``--max-tokens 8 (this run: 16)`` for each option of ``kind`` both runs recorded
    with different values (``mine``, ``theirs``: what each run was taken with, its
    ``options`` among them), in this run's order; ``skip``: options compared elsewhere."""
    now, before = _kind(mine, kind), _kind(theirs, kind)
    skipped = set(skip)
    return [
        f"{flag} {shown(before[flag])} (this run: {shown(value)})"
        for flag, value in now.items()
        if flag in before and flag not in skipped and before[flag] != value
    ]


def _kind(taken_with: Mapping[str, object], kind: str) -> Mapping[str, Any]:
    options = taken_with.get("options")
    values = options.get(kind) if isinstance(options, Mapping) else None
    return values if isinstance(values, Mapping) else {}
