"""Attribution: a witness the target has been shown to get wrong is no evidence for
another requirement.

Some findings rest on a part of the answer that a requirement of its own judges: a
FINISH-LENGTH finding that counts the tokens by ``usage``, a STREAM-MAX-TOKENS finding that
counts them by the streamed logprobs. When the target is shown to get that witness wrong
(USAGE-COMPLETION-TOKENS on a FastChat that reports its loop index, STREAM-LOGPROBS-OFFSETS
on a server whose per-chunk logprobs are cumulative), the same defect would be reported a
second time under the wrong owner. :func:`attribute` runs once over a run's merged Results
(before the verdict) and withholds those findings, noting each on its tally as "not
judged", never dropping it silently.

A check names its witness with ``Violation(..., witness=...)``; the tally keeps those
failures apart (``Tally.witnessed``). Logprobs are a witness per mode (streamed, non-streamed:
results.PER_MODE_WITNESSES), and so is usage. Witnesses are settled in order: logprobs first, since
a usage requirement may itself rest on logprobs (USAGE-COMPLETION-TOKENS counts them).
"""

from __future__ import annotations

from typing import Any

from conformance.results import Results, Tally

#: Results.meta key: the findings withheld, per requirement and witness.
ATTRIBUTION = "attribution"

#: Each witness, in the order settled, and the requirements that judge it on its own
#: terms: a failure of one of them shows the target gets the witness wrong. Only judges of
#: the count itself: a prompt count (USAGE-PROMPT-TOKENS), a usage chunk in the wrong place
#: (STREAM-USAGE) or tokens rendered unlike the text (LOGPROBS-TOKENS-TEXT) say nothing of
#: how many tokens were generated.
SHOWN_BY: dict[str, tuple[str, ...]] = {
    # Per mode (results.PER_MODE_WITNESSES): a finding on a streamed answer rests on
    # "stream-logprobs", one on a body on "logprobs".
    "logprobs": ("LOGPROBS-SHAPE", "LOGPROBS-OFFSETS"),
    "stream-logprobs": ("STREAM-LOGPROBS-SHAPE", "STREAM-LOGPROBS-OFFSETS"),
    "usage": ("USAGE-COMPLETION-TOKENS",),
    # A usage chunk is also shown wrong by the non-streamed answer to the same request,
    # when both have the same text and the counts differ.
    "stream-usage": ("USAGE-COMPLETION-TOKENS", "STREAM-USAGE-MATCHES"),
    # Whether the prompt was echoed at all, and at its index: a token-id prompt's echo
    # cannot be read from the text, so ECHO-LOGPROBS-PROMPT leans on the echo the prefix
    # checks judge, and on the placement CHOICES-INDEX judges (a choice at another prompt's
    # index, numbered as the choices finished, covers that other prompt's positions).
    "echo": ("ECHO-PREFIX", "STREAM-ECHO-PREFIX", "CHOICES-INDEX"),
    # Whether max_tokens 0 is honoured: a "stop" under it on a text that cannot show what
    # was generated (an echoed token-id prompt) is the ignored limit the max_tokens
    # requirements show on the answers that can.
    "max-tokens-0": ("USAGE-MAX-TOKENS", "STREAM-MAX-TOKENS"),
    # Whether echo + logprobs cover the prompt: tokens that spell only the generated text
    # are that requirement's defect, not a second one of LOGPROBS-TOKENS-TEXT.
    "echo-logprobs": ("ECHO-LOGPROBS-PROMPT",),
}


def attribute(results: Results) -> list[dict[str, Any]]:
    """Withhold every failure whose witness another requirement showed wrong; return (and
    add to ``results.meta[ATTRIBUTION]``) what was withheld. Running it again changes
    nothing."""
    withheld: list[dict[str, Any]] = []
    for witness, judges in SHOWN_BY.items():
        wrong = [rid for rid in judges if (t := results.tallies.get(rid)) and t.failed]
        for tally in results.tallies.values():
            shown_by = [rid for rid in wrong if rid != tally.id]
            if shown_by and tally.witnessed.get(witness):
                withheld.append(_withhold(tally, witness, shown_by))
    if withheld:
        results.meta.setdefault(ATTRIBUTION, []).extend(withheld)
    return withheld


def _withhold(tally: Tally, witness: str, shown_by: list[str]) -> dict[str, Any]:
    prints = tally.witnessed.pop(witness)
    count = min(sum(prints.values()), tally.failed)
    tally.failed -= count
    # Not judged is not passed: the exchanges leave the count of those checked.
    tally.checked -= count
    tally.fingerprints = [fp for fp in tally.fingerprints if fp not in prints]
    tally.examples = [ex for ex in tally.examples if ex.get("fingerprint") not in prints]
    note = f"{count} finding(s) not judged: {witness} shown wrong by {', '.join(shown_by)}"
    tally.not_judged.append(note)
    return {"requirement": tally.id, "witness": witness, "shown_by": shown_by, "findings": count}
