"""A request the suite sends, with the reason it is sent."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import quote

Mode = Literal["valid", "edge", "invalid", "probe"]
Auth = Literal["default", "none", "malformed", "wrong"]

#: Sent with every request: what the suite means by it, so that a server-side log can
#: count valid, edge, probe and invalid requests without the suite's own bookkeeping
#: (schemathesis sends ``X-Schemathesis-TestCaseId`` for the same reason). The value is
#: the mode, and for an invalid case ``; breaks=`` and the rule, percent-encoded.
CASE_HEADER = "X-Conformance-Case"
#: Tag of a valid request that a target may refuse with a 4xx without declining a feature
#: (a token id outside the model's vocabulary): served or refused, never a 5xx.
MAY_REFUSE_TAG = "edge:may-refuse"
#: Tag of every send of a request sent ``SENDS`` times because its answer may vary from one
#: send to the next (a stream with logprobs, several choices: vLLM failed such a stream 1
#: time in 9): an intermittent failure has a chance to show, and is counted per request.
REPEATED_TAG = "send:repeated"
SENDS = 3


@dataclass(frozen=True, slots=True)
class Case:
    """One request body plus how and why it is sent.

    ``body`` is the JSON request body. ``raw_body`` replaces it on the wire when a case
    must send bytes that are not a JSON object (an invalid case). ``breaks`` names the
    rule an invalid case breaks; ``auth`` says which credentials go with it.
    """

    body: dict[str, Any]
    mode: Mode = "valid"
    label: str = ""
    breaks: str | None = None
    auth: Auth = "default"
    raw_body: bytes | None = None
    tags: frozenset[str] = field(default_factory=frozenset)

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    @property
    def prompts(self) -> list[Any]:
        """The prompts of the request: one per expected group of ``n`` choices."""
        prompt = self.body.get("prompt")
        if isinstance(prompt, list) and prompt and not all(isinstance(p, int) for p in prompt):
            return list(prompt)
        return [prompt]

    @property
    def n(self) -> int:
        """Choices per prompt: the request's ``n`` (``2.0`` counts as 2), at least 1.

        A spec without a minimum (Nscale) makes ``n: 0`` and ``n: -5`` valid requests; the
        count a server owes them is stated nowhere, so they are read as one choice per
        prompt rather than as zero (a division by zero) or a negative count."""
        n = self.int_param("n")
        return 1 if n is None else max(1, n)

    def int_param(self, name: str) -> int | None:
        """The integer the request sent as ``name`` (None if absent or not an integer)."""
        return requested_int(self.body.get(name))

    @property
    def may_vary(self) -> bool:
        """An edge request whose answer may vary from one send to the next in what servers
        get wrong now and then: a stream with logprobs, or several choices."""
        streamed_logprobs = self.stream and self.body.get("logprobs") is not None
        return self.mode == "edge" and (streamed_logprobs or self.n > 1)

    @property
    def header(self) -> str:
        """The :data:`CASE_HEADER` value: ``valid``, ``edge``, ``probe``, or
        ``invalid; breaks=<rule>`` (the rule percent-encoded: header-safe ASCII)."""
        if self.mode != "invalid" or not self.breaks:
            return self.mode
        return f"{self.mode}; breaks={quote(self.breaks, safe=':<>+=.,_')}"


def requested_int(value: Any) -> int | None:
    """``value`` as the integer a request means by it: ``2`` or ``2.0`` (JSON Schema counts
    an integral number as an integer, so ``n: 2.0`` is a valid request for two choices)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def repeated(cases: list[Case]) -> list[Case]:
    """``cases`` with each one that may vary sent ``SENDS`` times, every send tagged
    ``REPEATED_TAG`` (and its number, so that no two sends are the same case) under the
    same label, by which the tallies count its sends."""
    out: list[Case] = []
    for case in cases:
        if not case.may_vary:
            out.append(case)
            continue
        out += [replace(case, tags=case.tags | {REPEATED_TAG, f"send:{k}"}) for k in range(SENDS)]
    return out
