"""Request validation of the reference target, derived from the loaded spec.

A body is checked in four layers, each a 400 naming the field:

1. strict JSON, and a JSON object;
2. the spec's request schema, errata applied: the very validator the suite compiles
   (``Spec.validators["request"]``), so tightening a bound in the spec tightens the target;
3. the cross-field rules the spec *text* states (``CROSS_RULES``, per flavor, each with its
   source): a schema cannot express them;
4. the fake model's own limits (``MODEL_LIMITS``, context length, vocabulary): a provider
   may refuse what its model cannot do, even where a spec leaves the value open.

Every refusal goes through ``refuse``: by default it raises; the ``accepts-invalid`` fault
waves refusals through, and validation then repairs the body (drops the bad field,
clamps the rule) so the request is answered 200.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Final

from jsonschema.exceptions import ValidationError, best_match

from conformance.judging.document.spec import Spec, load_spec
from conformance.reference import model
from conformance.reference.flavors import ApiError
from conformance.reference.model import Prompt

__all__ = [
    "CONTEXT_LENGTH",
    "CROSS_RULES",
    "MAX_COMPLETIONS",
    "MODEL_LIMITS",
    "CompletionRequest",
    "CrossRule",
    "Refuse",
    "parse_request",
    "spec_for",
]

#: Prompt tokens plus max_tokens may not exceed this, as on OpenAI.
CONTEXT_LENGTH: Final = 8192
#: Most completions (prompts x candidates) one request may ask for.
MAX_COMPLETIONS: Final = 2560
DEFAULT_MAX_TOKENS: Final = 16

#: The fake model's bounds (low, high; None = open) on top of any spec: AIHubMix states
#: most of them in its schema, Nscale states none (its max_tokens may be -1 on paper: a
#: negative max_tokens past the schema is "no limit", generating DEFAULT_MAX_TOKENS).
MODEL_LIMITS: Final[Mapping[str, tuple[float | None, float | None]]] = {
    "max_tokens": (0, None),
    "temperature": (0.0, None),
    "top_p": (0.0, 1.0),
    "n": (1, 128),
    "best_of": (0, 20),
    # Above 5 is a capability limit (the AIHubMix maximum) in both flavors.
    "logprobs": (0, 5),
}

#: A hook consulted on each refusal: the error to answer with, or None to go on.
Refuse = Callable[[ApiError], ApiError | None]


def _raise(error: ApiError) -> ApiError:
    return error


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """A validated completion request with every default filled in."""

    model: str
    prompts: tuple[Prompt, ...]
    token_prompt: bool
    max_tokens: int
    temperature: float
    top_p: float
    n: int
    best_of: int | None
    stream: bool
    include_usage: bool
    logprobs: int | None
    echo: bool
    stop: tuple[str, ...]
    seed: int | None
    suffix: str | None
    #: Fields the client sent with a non-null value.
    present: frozenset[str]
    #: The prompt came as a list of prompts (strings or token arrays), not a single one.
    prompt_list: bool = False


@dataclass(frozen=True, slots=True)
class CrossRule:
    """A rule across fields that the spec text states (named as the suite names it)."""

    rule: str
    source: str
    param: str
    message: str
    broken: Callable[[CompletionRequest], bool]
    repair: Callable[[CompletionRequest], CompletionRequest]


_BEST_OF_BELOW_N = CrossRule(
    "cross:best_of<n",
    "AIHubMix best_of: '`best_of` must be greater than `n`'",
    "best_of",
    "'best_of' must be at least 'n'.",
    lambda r: r.best_of is not None and r.best_of < r.n,
    lambda r: replace(r, best_of=r.n),
)
_BEST_OF_STREAM = CrossRule(
    "cross:best_of+stream",
    "AIHubMix best_of: 'Results cannot be streamed.'",
    "best_of",
    "'best_of' greater than 1 cannot be used with 'stream'.",
    lambda r: r.stream and r.best_of is not None and r.best_of > 1,
    lambda r: replace(r, best_of=None),
)
_STREAM_OPTIONS = CrossRule(
    "cross:stream_options-without-stream",
    "AIHubMix stream_options: 'Only set this when you set `stream: true`.'",
    "stream_options",
    "'stream_options' is only allowed when 'stream' is true.",
    lambda r: "stream_options" in r.present and not r.stream,
    lambda r: replace(r, include_usage=False),
)

#: Cross-field rules per flavor. The Nscale document states none of them; the target keeps
#: OpenAI's behaviour there (a provider may refuse these combinations), which the
#: project's own tests rely on. Drop a rule from a flavor's list to stop enforcing it.
CROSS_RULES: Final[Mapping[str, tuple[CrossRule, ...]]] = {
    "aihubmix": (_BEST_OF_BELOW_N, _BEST_OF_STREAM, _STREAM_OPTIONS),
    "openai": (_BEST_OF_BELOW_N, _BEST_OF_STREAM, _STREAM_OPTIONS),  # the same sentences
    "nscale": (_BEST_OF_BELOW_N, _BEST_OF_STREAM, _STREAM_OPTIONS),
}


@cache
def spec_for(flavor: str) -> Spec:
    """The vendored spec a flavor follows, loaded once per process."""
    return load_spec(flavor)


# --------------------------------------------------------------------------------------
# Layer 1: a JSON object
# --------------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    """The JSON type of a value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _invalid(message: str, *, code: str = "invalid_value", param: str | None) -> ApiError:
    return ApiError(400, message, code=code, origin="invalid", param=param)


def _body_object(raw: bytes, refuse: Refuse) -> dict[str, Any]:
    """The request body as strict JSON (no NaN or Infinity) that is an object."""

    def no_constants(constant: str) -> Any:
        raise ValueError(f"{constant} is not valid JSON")

    try:
        body = json.loads(raw, parse_constant=no_constants)
    except (ValueError, RecursionError) as exc:
        _reject(
            refuse,
            _invalid(
                f"We could not parse the JSON body of your request ({exc}).",
                code="invalid_json",
                param=None,
            ),
        )
        return {}
    if not isinstance(body, dict):
        _reject(
            refuse,
            _invalid(
                f"The request body must be a JSON object, not {_kind(body)}.",
                code="invalid_type",
                param=None,
            ),
        )
        return {}
    return body


def _reject(refuse: Refuse, error: ApiError) -> None:
    """Raise what ``refuse`` makes of the error, or return to repair and go on."""
    answer = refuse(error)
    if answer is not None:
        raise answer


# --------------------------------------------------------------------------------------
# Layer 2: the spec's request schema
# --------------------------------------------------------------------------------------


def _range_error(name: str, value: Any, lo: Any, hi: Any) -> ApiError:
    if lo is None and hi is None:
        bound = "a finite number"
    elif lo is not None and hi is not None:
        bound = f"between {lo} and {hi}"
    elif lo is not None:
        bound = f"at least {lo}"
    else:
        bound = f"at most {hi}"
    return _invalid(
        f"Invalid value for '{name}': {value!r} is out of range; it must be {bound}.", param=name
    )


def _schema_error(error: ValidationError, body: Mapping[str, Any]) -> ApiError:
    """The 400 for the most relevant schema error, naming the top-level field."""
    path = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        missing = next(n for n in error.validator_value if n not in (error.instance or {}))
        param = ".".join([*path, missing])
        return _invalid(
            f"Missing required parameter: '{param}'.",
            code="missing_required_parameter",
            param=param,
        )
    field = path[0] if path else None
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator in ("minimum", "maximum") and field is not None and len(path) == 1:
        return _range_error(field, error.instance, schema.get("minimum"), schema.get("maximum"))
    kind = "type" if error.validator in ("type", "anyOf", "oneOf") else "value"
    where = f"'{field}'" if field else "the request body"
    got = f" (got {_kind(body.get(field))})" if kind == "type" and field else ""
    return _invalid(
        f"Invalid {kind} for {where}: {error.message}{got}.",
        code=f"invalid_{kind}",
        param=field,
    )


def _check_schema(body: dict[str, Any], spec: Spec, refuse: Refuse) -> dict[str, Any]:
    """Validate against the spec's request schema; when waved through, drop bad fields."""
    validator = spec.validators["request"]
    errors = list(validator.iter_errors(body)) if validator is not None else []
    first = best_match(errors)
    if first is None:
        return body
    _reject(refuse, _schema_error(first, body))
    bad = {str(e.absolute_path[0]) for e in errors if e.absolute_path}
    return {k: v for k, v in body.items() if k not in bad}


# --------------------------------------------------------------------------------------
# Layer 4 (applied before building): the model's own limits
# --------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    # bool is a subclass of int in Python, never in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_limits(body: dict[str, Any], refuse: Refuse) -> dict[str, Any]:
    """Numeric fields within the model's limits and finite; repaired by dropping them."""
    out = dict(body)
    for name, value in body.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if name == "max_tokens" and _is_int(value) and value < 0:
            # Past the schema, so the spec sets no minimum (Nscale): a negative max_tokens
            # means "no limit", answered as OpenAI does, up to the default length.
            out[name] = DEFAULT_MAX_TOKENS
            continue
        lo, hi = MODEL_LIMITS.get(name, (None, None))
        try:
            finite = math.isfinite(value)
        except OverflowError:
            finite = False
        if not finite or (lo is not None and value < lo) or (hi is not None and value > hi):
            _reject(refuse, _range_error(name, value, lo, hi))
            del out[name]
    return out


def _token_ids(ids: list[Any], refuse: Refuse) -> list[int]:
    """One token-id prompt: non-empty, integers in ``[0, VOCAB_SIZE)``."""
    if not ids:
        _reject(refuse, _invalid("Token-id prompts in 'prompt' must not be empty.", param="prompt"))
    out: list[int] = []
    for token in ids:
        if not 0 <= token < model.VOCAB_SIZE:
            _reject(
                refuse,
                _invalid(
                    f"Invalid token id {token} in 'prompt': token ids must be in "
                    f"[0, {model.VOCAB_SIZE}).",
                    param="prompt",
                ),
            )
            token %= model.VOCAB_SIZE
        out.append(int(token))
    return out


def _prompts(value: Any, refuse: Refuse) -> tuple[tuple[Prompt, ...], bool]:
    """The prompts (schema-valid already), and whether they were given as token ids."""
    if value is None:  # absent, or null meaning the default (AIHubMix)
        return (Prompt.from_text(model.DEFAULT_PROMPT),), False
    if isinstance(value, str):
        return (Prompt.from_text(value),), False
    if not value:
        _reject(refuse, _invalid("'prompt' must not be an empty array.", param="prompt"))
        return (Prompt.from_text(""),), False
    if all(isinstance(p, str) for p in value):
        return tuple(Prompt.from_text(p) for p in value), False
    if all(_is_int(p) for p in value):
        return (Prompt.from_ids(_token_ids(value, refuse)),), True
    return tuple(Prompt.from_ids(_token_ids(ids, refuse)) for ids in value), True


# --------------------------------------------------------------------------------------
# Building the request, then layers 3 and 4
# --------------------------------------------------------------------------------------


def _optional_int(given: Mapping[str, Any], name: str) -> int | None:
    return int(given[name]) if name in given else None


def _build(body: Mapping[str, Any], default_model: str, refuse: Refuse) -> CompletionRequest:
    """Read the (valid) fields; null means the default, as an absent field does."""
    given = {k: v for k, v in body.items() if v is not None}
    get = given.get
    raw_prompt = get("prompt")
    prompts, token_prompt = _prompts(raw_prompt, refuse)
    stop = get("stop", ())
    options = get("stream_options") or {}
    return CompletionRequest(
        model=get("model", default_model),
        prompts=prompts,
        token_prompt=token_prompt,
        max_tokens=int(get("max_tokens", DEFAULT_MAX_TOKENS)),
        temperature=float(get("temperature", 1.0)),
        top_p=float(get("top_p", 1.0)),
        n=int(get("n", 1)),
        best_of=_optional_int(given, "best_of"),
        stream=bool(get("stream", False)),
        include_usage=options.get("include_usage") is True,
        logprobs=_optional_int(given, "logprobs"),
        echo=bool(get("echo", False)),
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        seed=_optional_int(given, "seed"),
        suffix=get("suffix"),
        present=frozenset(k for k, v in body.items() if v is not None),
        prompt_list=isinstance(raw_prompt, list) and not all(_is_int(p) for p in raw_prompt),
    )


def _check_cross(request: CompletionRequest, flavor: str, refuse: Refuse) -> CompletionRequest:
    for rule in CROSS_RULES[flavor]:
        if rule.broken(request):
            _reject(refuse, _invalid(rule.message, param=rule.param))
            request = rule.repair(request)
    return request


def _check_capacity(request: CompletionRequest, refuse: Refuse) -> CompletionRequest:
    """The model's context length and the most completions one request may ask for."""
    longest = max(len(p.tokens) for p in request.prompts)
    if longest + request.max_tokens > CONTEXT_LENGTH:
        _reject(
            refuse,
            _invalid(
                f"This model's maximum context length is {CONTEXT_LENGTH} tokens, but you "
                f"requested {longest + request.max_tokens} ({longest} in the prompt, "
                f"{request.max_tokens} for the completion).",
                code="context_length_exceeded",
                param="max_tokens" if "max_tokens" in request.present else "prompt",
            ),
        )
        request = replace(request, max_tokens=max(0, CONTEXT_LENGTH - longest))
    if len(request.prompts) * max(request.n, request.best_of or 1) > MAX_COMPLETIONS:
        _reject(
            refuse,
            _invalid(
                f"Too many completions requested: at most {MAX_COMPLETIONS} "
                "(prompts x max(n, best_of)).",
                param="n",
            ),
        )
    return request


def parse_request(
    raw: bytes, flavor: str, *, default_model: str = "", refuse: Refuse = _raise
) -> CompletionRequest:
    """Parse and validate a request body under a flavor's spec, raising ``ApiError`` (400).

    ``refuse`` sees each refusal first: returning None (the ``accepts-invalid`` fault)
    repairs the body instead (bad fields fall back to their defaults).
    """
    body = _body_object(raw, refuse)
    body = _check_schema(body, spec_for(flavor), refuse)
    body = _check_limits(body, refuse)
    request = _build(body, default_model, refuse)
    request = _check_cross(request, flavor, refuse)
    return _check_capacity(request, refuse)
