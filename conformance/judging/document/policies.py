"""The suite's interpretations of the documents: named, explained, switchable.

Errata (conformance/judging/document/spec.py) correct defects *of a document*; each is detected in the
document loaded and applied only there. Policies are different: they are how *the suite*
reads what a document leaves open or states loosely (a rule in prose, a header named in a
sentence, null sent by every client). Each has an ID, a rationale and a switch; all of
them are off under ``--strict-spec``, which judges and generates from the documents as
written. :func:`registry` lists both kinds for the terminal header and the reports.
"""

from __future__ import annotations

from dataclasses import dataclass

STRICT_SWITCH = "--strict-spec"


@dataclass(frozen=True, slots=True)
class Policy:
    """One interpretation the suite applies on top of the documents."""

    id: str
    title: str
    rationale: str
    switch: str = STRICT_SWITCH


BEST_OF_EQUAL_N = Policy(
    "best-of-equal-n-valid",
    "best_of == n is not judged invalid",
    "The AIHubMix text says best_of 'must be greater than n', but OpenAI's server accepts "
    "equality and clients send it: only best_of < n is an invalid case; equality is never "
    "sent as valid either. Off: best_of == n is invalid where the text says 'greater than'.",
)
FFFD_STOP = Policy(
    "fffd-stop-not-judged",
    "stop sequences with U+FFFD are neither sent nor judged",
    "U+FFFD in a decoded answer stands for bytes that are not UTF-8: no server can match it "
    "as a stop sequence, so the stop probe never picks a word containing it.",
)
NULL_AS_DEFAULT = Policy(
    "null-means-default",
    "an explicit null for an optional parameter is not an invalid case",
    "Clients send null to mean 'the default' and servers read it so, even where an "
    "OpenAPI 3.0 schema forbids null. Off: null is an invalid value wherever the schema "
    "rejects it.",
)
NULL_RESPONSE_FIELDS = Policy(
    "null-response-fields",
    "null logprobs/finish_reason/usage/param tolerated at MUST level",
    "Documents that type these response fields non-nullable are contradicted by nearly "
    "every server; the schema check accepts null there and a SHOULD requirement reports it.",
)
REQUEST_ID_HEADER = Policy(
    "request-id-header-from-text",
    "the request-id header named in the error schema's prose",
    "A document that says request_id 'lives in the `X-Request-Id` response header' names a "
    "header no schema requires; the suite expects it (SHOULD). Off: only headers the "
    "responses declare as required are expected.",
)
OPENAI_PROMPT_FORMS = Policy(
    "openai-prompt-forms",
    "the four OpenAI prompt forms when the schema admits no prompt",
    "A request schema that admits no prompt at all still needs requests to be tested: the "
    "string, string-array, token-array and token-arrays forms of OpenAI's API are sent. "
    "Off: such a document yields no valid request and the run says so.",
)
DONE_SENTINEL = Policy(
    "done-sentinel",
    "`data: [DONE]` terminates a stream though no schema holds it",
    "The terminator is not JSON and in no event-stream schema; it is required exactly "
    "once, last, and is not validated as a chunk.",
)
MEDIA_TYPE_PARAMETERS = Policy(
    "media-type-parameters",
    "declared media types match with or without parameters",
    "`application/json; charset=utf-8` and `application/json` name the same type: the "
    "suite sends the declared one and accepts either in answers.",
)

POLICIES: tuple[Policy, ...] = (
    BEST_OF_EQUAL_N,
    FFFD_STOP,
    NULL_AS_DEFAULT,
    NULL_RESPONSE_FIELDS,
    REQUEST_ID_HEADER,
    OPENAI_PROMPT_FORMS,
    DONE_SENTINEL,
    MEDIA_TYPE_PARAMETERS,
)


def active_policies(*, strict: bool) -> tuple[Policy, ...]:
    """The policies in force: all of them, none under ``--strict-spec``."""
    return () if strict else POLICIES


def strict_help() -> str:
    """The ``--strict-spec`` help text: what it switches off, by ID."""
    from conformance.judging.document.errata import (  # light: names only, no spec loaded
        CONVENTIONS,
        ERRATA,
    )

    return (
        "Judge and generate by the documents as written: none of the errata (document "
        "defects, each applied only where the loaded document has it and then listed in "
        "the header and reports) "
        + ", ".join(e.id for e in ERRATA)
        + "; and none of the policies (the suite's interpretations) "
        + ", ".join(p.id for p in POLICIES)
        + ". The conventions of real documents stay on, since they correct nothing: "
        + ", ".join(c.id for c in CONVENTIONS)
        + " (see specs/README.md, docs/any-document.md)."
    )
