"""A failure's fingerprint: what identifies a defect, not the request that happened to show it.

``--baseline`` accepts a run's failures by fingerprint, so a fingerprint must come back
the same when the same defect is found by other requests: at another ``--seed``, another
``--max-examples``, another shard. It is ``REQUIREMENT|class|path|message``:

- the requirement;
- the request's class (:func:`request_class`): ``stream`` or ``non-stream`` (the two wire
  formats: a defect of one is not a defect of the other), an invalid request's rule, a
  credentials case's kind;
- where: the JSON path, its indexes as ``[*]`` (``choices[3]`` and ``event[12]`` vary with
  the answer's length, not with the defect);
- what was wrong: the check's message with numbers and quoted values replaced and
  bracketed values collapsed (``total_tokens 11 != prompt_tokens 2 + ...`` and
  ``'abc' is not of type 'integer'`` carry the draw's values).

Never a generated label or value. Prompt form, ``echo`` and ``logprobs`` are left out of
the class on purpose: a run draws a handful of requests, so which combinations it draws is
chance. Measured on the reference target's ``usage-arithmetic`` fault, a baseline at seed
0 met 3 "new" fingerprints at seed 1 and 6 at ``--max-examples 20`` with them in the
class, 0 without; where such a feature matters to a defect it is in the requirement
(ECHO-*, LOGPROBS-*) or the path (``choices[*].logprobs.tokens``) already.
"""

from __future__ import annotations

import re

from conformance.judging.wire.case import Case

#: Fingerprints of this shape have four fields; the suite's first ones had three
#: (``REQUIREMENT|label shape|path``) and named generated requests.
FIELDS = 4
MESSAGE_CHARS = 160

_INDEX = re.compile(r"\[\d+\]")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# A bracketed value (a list or object shown in a message) after quotes and numbers are
# replaced: its length is the draw's. Innermost first, until none is left.
_BRACKETED = re.compile(r"\[[^\[\]]*\]|\{[^{}]*\}|\([#…, ]*\)")
_SPACE = re.compile(r"\s+")
_LIST, _OBJECT = "\0", "\1"


def normalise_path(path: str | None) -> str:
    """``choices[1].logprobs.text_offset[3]`` -> ``choices[*].logprobs.text_offset[*]``."""
    return _INDEX.sub("[*]", path or "")


def normalise_message(message: str) -> str:
    """What was wrong, without the values of this one exchange."""
    text = _NUMBER.sub("#", _QUOTED.sub("…", message))
    # Innermost brackets first: a collapsed value becomes a bracket-free placeholder, so
    # the value around it is collapsed next (each pass removes brackets: it ends).
    while (collapsed := _BRACKETED.sub(_placeholder, text)) != text:
        text = collapsed
    text = text.replace(_LIST, "[…]").replace(_OBJECT, "{…}")
    return _SPACE.sub(" ", text).replace("|", "/").strip()[:MESSAGE_CHARS]


def _placeholder(match: re.Match[str]) -> str:
    return _OBJECT if match.group(0).startswith("{") else _LIST


def request_class(case: Case) -> str:
    """The class of request a finding was made on, from the case's body and purpose."""
    if case.auth != "default":
        return f"auth:{case.auth}"
    if case.breaks:  # the rule an invalid request breaks: a name, not a drawn value
        return f"invalid:{case.breaks}"
    if case.mode == "invalid":
        return "invalid"
    return "stream" if case.stream else "non-stream"


def fingerprint(requirement: str, request: str, path: str | None, message: str) -> str:
    return "|".join((requirement, request, normalise_path(path), normalise_message(message)))


def is_current(fingerprint_text: str) -> bool:
    """Whether a stored fingerprint has this shape (not an older suite's)."""
    return fingerprint_text.count("|") == FIELDS - 1
