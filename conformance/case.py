"""A request the suite sends, with the reason it is sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["valid", "edge", "invalid", "probe"]
Auth = Literal["default", "none", "malformed", "wrong"]


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
        n = self.body.get("n")
        return n if isinstance(n, int) and not isinstance(n, bool) else 1
