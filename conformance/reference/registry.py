"""The fault registry: named misbehaviours as transformers at fixed stages of a request.

A fault is declared once, where its behaviour is written::

    @fault("status-201", "Successful completions are answered with status 201 ...", "head")
    def _status_201(head: Head) -> Head:
        return replace(head, status=201)

and ``@also("status-201", "other-stage")`` adds a transformer at a second stage. The
conformant path of the target calls ``ActiveFaults.fold(stage, value, *context)`` at each
stage; with no fault switched on it returns ``value`` unchanged. Transformers of one stage
run in registration order. The stages, and what their transformers take and return:

============  ==========================================  =====================================
stage         transformer                                 where
============  ==========================================  =====================================
refusal       (ApiError) -> ApiError | None (None: go on) every refusal (auth, invalid, model)
admit         (count) -> ApiError | None                  each completion request, after auth
request       (CompletionRequest) -> ApiError | None      after validation and the model check
remembered    (CompletionRequest, dict) -> ApiError|None  after ``request``, with the target's memory
parsed        (CompletionRequest) -> CompletionRequest    the request as the model is given it
plan          (Plan) -> Plan                              what the model is asked to generate
finish        (str) -> str                                each choice's finish_reason
usage         (dict) -> dict                              both modes' usage objects
body          (dict, CompletionRequest) -> dict           a non-streamed body, before nulls go
nulls         (bool) -> bool                              omit Nscale's nulls (non-streamed)?
chunk         (dict, CompletionRequest) -> dict           each content chunk of a stream
stream        (list, StreamContext) -> list               a stream's payloads (dicts, str, DONE)
head          (Head) -> Head                              status and media type of a 2xx reply
framing       (Framing) -> Framing                        how SSE events are written
pacing        (Pacing) -> Pacing                          delays, stalls and write sizes
error-reply   (ErrorReply) -> ErrorReply                  status, payload, media type of errors
request-id    (str | None) -> str | None                  the request-id header's name
model-card    (dict) -> dict                              each model object of /v1/models
============  ==========================================  =====================================

``TOLERATED`` faults are legal behaviour a correct suite must accept; ``CAPABILITY`` ones
are tolerated but reported as a declined capability.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["REGISTRY", "STAGES", "ActiveFaults", "Fault", "also", "fault"]

STAGES = (
    "refusal",
    "admit",
    "request",
    "remembered",
    "parsed",
    "plan",
    "finish",
    "usage",
    "body",
    "nulls",
    "chunk",
    "stream",
    "head",
    "framing",
    "pacing",
    "error-reply",
    "request-id",
    "model-card",
)

Hook = Callable[..., Any]
F = TypeVar("F", bound=Hook)


@dataclass(slots=True)
class Fault:
    """One registered fault: its catalogue entry and its transformers by stage."""

    name: str
    description: str
    tolerated: bool = False
    capability: bool = False
    hooks: dict[str, list[Hook]] = field(default_factory=dict)


#: Every fault by name, in registration order.
REGISTRY: dict[str, Fault] = {}
#: (stage, fault name, transformer) in registration order, the order they run in.
_ORDER: list[tuple[str, str, Hook]] = []


def _add(name: str, stage: str, hook: Hook) -> None:
    REGISTRY[name].hooks.setdefault(stage, []).append(hook)
    _ORDER.append((stage, name, hook))


def fault(
    name: str,
    description: str,
    *stages: str,
    tolerated: bool = False,
    capability: bool = False,
) -> Callable[[F], F]:
    """Declare a fault and register the decorated transformer at ``stages``."""
    if name in REGISTRY:
        raise ValueError(f"fault {name!r} is declared twice")
    if "\n" in description or not description:
        raise ValueError(f"fault {name!r} needs a one-line description")
    if capability and not tolerated:
        raise ValueError(f"capability fault {name!r} must be tolerated")
    register = _registrar(name, stages)
    REGISTRY[name] = Fault(name, description, tolerated, capability)
    return register


def _registrar(name: str, stages: tuple[str, ...]) -> Callable[[F], F]:
    unknown = [stage for stage in stages if stage not in STAGES]
    if unknown:
        raise ValueError(f"unknown fault stage {unknown[0]!r}; stages: {', '.join(STAGES)}")

    def register(hook: F) -> F:
        for stage in stages:
            _add(name, stage, hook)
        return hook

    return register


def also(name: str, *stages: str) -> Callable[[F], F]:
    """Register one more transformer for a fault already declared with ``fault``."""
    if name not in REGISTRY:
        raise ValueError(f"fault {name!r} is not declared")
    return _registrar(name, stages)


def stream_fault(name: str, description: str, **kinds: bool) -> Callable[[F], F]:
    """Declare a fault of the ``stream`` stage: its transformer takes and returns the payload
    list (chunk dicts, raw strings, ``DONE``) and the ``StreamContext``."""
    return fault(name, description, "stream", **kinds)


T = TypeVar("T")


class ActiveFaults:
    """The transformers of the faults switched on in one target, by stage."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        #: What a fault remembers between requests to this target (``remembered`` stage):
        #: per target, so two targets with the same fault never share it.
        self.memory: dict[str, Any] = {}
        self._by_stage: dict[str, list[Hook]] = {}
        for stage, name, hook in _ORDER:
            if name in self.names:
                self._by_stage.setdefault(stage, []).append(hook)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def fold(self, stage: str, value: T, *context: Any) -> T:
        """``value`` passed through each active transformer of ``stage``, in order.

        A transformer returning None ends the fold (a refusal waved through).
        """
        for hook in self._by_stage.get(stage, ()):
            if value is None:
                break
            value = hook(value, *context)
        return value

    def first(self, stage: str, *context: Any) -> Any:
        """The first non-None result of the stage's transformers (a refusal), or None."""
        for hook in self._by_stage.get(stage, ()):
            result = hook(*context)
            if result is not None:
                return result
        return None
