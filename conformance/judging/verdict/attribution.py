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

The same rules hold when a probe was cut. A witness that only a probe forms (the usage
chunk's count, compared with the same request's non-streamed answer) is no evidence in a
run where that probe's judge judged nothing (its stream cut by a bound, its twin a time-out
or refused): the findings resting on it are withheld too, noted "never formed".
"""

from __future__ import annotations

from conformance.judging.verdict.results import Results, Tally
from conformance.judging.verdict.run_info import Withheld

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
    # The stream twin's comparison where the body's count breaks a rule of its own (past
    # max_tokens for a text the usage chunk counts within it, or short of its own text):
    # that count is USAGE-MAX-TOKENS' or USAGE-COMPLETION-TOKENS' finding on the twin.
    "twin-usage": ("USAGE-MAX-TOKENS", "USAGE-COMPLETION-TOKENS"),
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


#: A witness shown wrong, besides by its judges, by the findings withheld as resting on
#: another: a comparison withheld as "twin-usage" showed the body's count wrong (the same
#: text, counted within max_tokens streamed, past it not), so a finding counted by the
#: body's usage alone (MAX-TOKENS-DEFAULT on LiteLLM's constant 20) is no evidence either.
SHOWN_THROUGH: dict[str, str] = {"usage": "twin-usage"}

#: Witnesses only a probe forms, and the requirement that judges them there: the usage
#: chunk's count is judged against the stream twin (USAGE-COMPLETION-TOKENS sees only a
#: count short of the text). Where that judge judged nothing in a whole run, the witness
#: never formed.
FORMED_BY: dict[str, str] = {"stream-usage": "STREAM-USAGE-MATCHES"}


def attribute(results: Results) -> list[Withheld]:
    """Withhold every failure whose witness another requirement showed wrong, or that no
    probe formed; return (and add to ``results.info.attribution``) what was withheld.
    Running it again changes nothing."""
    withheld: list[Withheld] = []
    unformed = _unformed(results)
    for witness, judges in SHOWN_BY.items():
        wrong = [rid for rid in judges if (t := results.tallies.get(rid)) and t.failed]
        through = SHOWN_THROUGH.get(witness)
        for record in [*(results.info.attribution or ()), *withheld]:
            if through and record.witness == through:
                wrong += [rid for rid in record.shown_by if rid not in wrong]
        for tally in results.tallies.values():
            shown_by = [rid for rid in wrong if rid != tally.id]
            if shown_by and tally.witnessed.get(witness):
                withheld.append(_withhold(tally, witness, shown_by))
            elif witness in unformed and tally.witnessed.get(witness):
                withheld.append(_withhold(tally, witness, [], unformed[witness]))
    results.note_withheld(withheld)
    return withheld


def _unformed(results: Results) -> dict[str, str]:
    """Witness -> why it never formed, for the probe-formed witnesses of a whole run whose
    judge judged nothing (a shard leaves that to the merge; Results built by hand or a
    replayed transcript played no probe that could be cut)."""
    record = results.run_record
    if not record.scenarios or record.shards:
        return {}
    out = {}
    for witness, judge in FORMED_BY.items():
        tally = results.tallies.get(judge)
        if tally is not None and not tally.checked and not tally.not_judged:
            out[witness] = (
                f"{judge} judged no exchange (its probe was cut or left nothing to compare)"
            )
    return out


def _withhold(tally: Tally, witness: str, shown_by: list[str], unformed: str = "") -> Withheld:
    prints = tally.witnessed.pop(witness)
    count = min(sum(prints.values()), tally.failed)
    tally.failed -= count
    # Not judged is not passed: the exchanges leave the count of those checked.
    tally.checked -= count
    tally.fingerprints = [fp for fp in tally.fingerprints if fp not in prints]
    tally.examples = [ex for ex in tally.examples if ex.fingerprint not in prints]
    why = f"shown wrong by {', '.join(shown_by)}" if shown_by else f"never formed: {unformed}"
    tally.not_judged.append(f"{count} finding(s) not judged: {witness} {why}")
    return Withheld(tally.id, witness, tuple(shown_by), count, None if shown_by else unformed)
