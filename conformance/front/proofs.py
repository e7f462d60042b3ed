"""The fault corpus: for every requirement, the reference-target fault that proves it can fail.

Each :class:`Proof` names a requirement, the fault of the reference target that violates
it, the flavor (spec) whose run shows it, and extra suite options. ``EXACT`` records, for
each fault (with its options) and each flavor, the exact set of requirements, at any
level, that fail when the whole suite runs against the faulty target: "one defect, one
finding" is the goal, and a set larger than the proved requirement is collateral made
visible, not tolerated silently. The project's tests run the suite for every entry under
both flavors and assert the set exactly; a CAPABILITY requirement must be reported
unsupported instead. They also run the suite against every legal variation in
``TOLERANCE`` and assert no finding at all, and that every registered requirement has a
proof here.

``EXACT`` (the measured sets) lives in conformance/front/proofs_exact.py.
``python -m conformance.front.proofs --write`` regenerates docs/proof.md;
``--measure`` runs the suite for every entry (``--only FAULT...``: those faults) and prints
``EXACT`` as source, to paste into proofs_exact.py after a check changes on purpose
(proof_table.py does the rendering and the measuring).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection
from pathlib import Path

from conformance.front import proof_table
from conformance.front.proof_table import Proof
from conformance.front.proofs_exact import EXACT
from conformance.reference.faults import FAULTS, TOLERATED

FLAVORS = ("aihubmix", "nscale")
#: Where a requirement's proof and its exact sets are written (the recipe's files).
PROOFS_FILE = "conformance/front/proofs.py"
EXACT_FILE = "conformance/front/proofs_exact.py"


def _p(requirement: str, fault: str, flavor: str = "aihubmix", args: tuple[str, ...] = ()) -> Proof:
    return Proof(requirement, fault, flavor, args)


PROOFS: tuple[Proof, ...] = (
    _p("HTTP-COMPLETE", "stream-stall", "aihubmix", args=("--stream-gap", "0.5")),
    _p("HTTP-STATUS-DECLARED", "stream-status-201"),
    _p("HTTP-4XX-DECLARED", "errors-422"),
    _p("RESP-CONTENT-TYPE", "json-content-type-text"),
    _p("RESP-SCHEMA", "schema-choices-not-array"),
    _p("RESP-HEADERS-REQUIRED", "missing-request-id-header", "nscale"),
    _p("RESP-OBJECT", "object-chunk", "nscale"),
    _p("RESP-CREATED", "created-millis"),
    _p("RESP-ID", "empty-id"),
    _p("RESP-CHOICE-TEXT", "choice-text-null"),
    # Under the openai-compatible contract a choice's `logprobs: null` is OpenAI's own answer
    # (the fault's only null): the document contract holds the target to the document.
    _p("RESP-NULL-FIELDS", "null-fields", "nscale", args=("--contract", "document")),
    _p("CHOICES-COUNT", "choices-ignore-n"),
    _p("CHOICES-INDEX", "duplicate-index"),
    _p("USAGE-TOTAL", "usage-arithmetic"),
    _p("USAGE-MAX-TOKENS", "exceed-max-tokens"),
    _p("FINISH-LENGTH", "finish-not-length"),
    _p("FINISH-ENUM", "finish-enum"),
    _p("ECHO-PREFIX", "echo-ignored"),
    _p("LOGPROBS-PRESENCE", "logprobs-ignored"),
    # Nscale's declared default applied: legal under Nscale, logprobs unasked under AIHubMix.
    _p("LOGPROBS-PRESENCE", "logprobs-declared-default"),
    _p("LOGPROBS-SHAPE", "logprobs-length-mismatch"),
    _p("LOGPROBS-VALUES", "logprobs-positive"),
    _p("LOGPROBS-TOP-COUNT", "top-logprobs-extra"),
    _p("LOGPROBS-OFFSETS", "text-offset-decreasing"),
    _p("LOGPROBS-TOKENS-TEXT", "tokens-mismatch-text"),
    _p("STOP-ABSENT", "stop-in-text"),
    # A stop returned in the text is STOP-ABSENT's (the stop probe's answer included): the
    # probe is proven where the stop is honoured but the choice ends otherwise ("eos_token"
    # for "stop", no finish_reason enum in Nscale).
    _p("STOP-ABSENT", "stop-ignored"),
    _p("STOP-PROBE", "finish-enum", "nscale"),
    # A stop across a token boundary (issue 25): the stop probe's piece across two words.
    _p("STOP-ABSENT", "stop-inside-one-token"),
    _p("VALID-NO-5XX", "capability-500"),
    _p("VALID-ACCEPTED", "reject-token-prompts"),
    _p("INVALID-REJECTED", "accepts-invalid"),
    _p("ERROR-ENVELOPE", "errors-fastapi"),
    # LiteLLM's str(None): "param": "None" where the envelope's param is nullable.
    _p("ERROR-ENVELOPE", "errors-stringified-nulls"),
    _p("ERROR-CONTENT-TYPE", "errors-text-plain"),
    _p("AUTH-REQUIRED", "auth-ignored"),
    _p("MODEL-NOT-FOUND", "unknown-model-200"),
    _p("MODEL-NOT-FOUND-404", "unknown-model-400"),
    # The window /v1/models advertises (issue 25): a prompt over it served as vLLM does.
    _p("CONTEXT-WINDOW-REJECTED", "context-window-ignored"),
    _p("USAGE-PROMPT-TOKENS", "usage-prompt-zero"),
    _p("USAGE-COMPLETION-TOKENS", "usage-completion-short"),
    # Attribution: the usage witness shown wrong is not evidence for (STREAM-)FINISH-LENGTH.
    _p("USAGE-COMPLETION-TOKENS", "usage-completion-off-by-one"),
    _p("REQUEST-ID-HEADER", "missing-request-id-header"),
    _p("STREAM-CONTENT-TYPE", "stream-content-type-json"),
    _p("STREAM-FRAMING", "stream-single-newline"),
    _p("STREAM-DATA-ONLY", "stream-event-type"),
    _p("STREAM-CHUNK-SCHEMA", "stream-not-json"),
    _p("STREAM-DONE", "stream-no-done"),
    _p("STREAM-ERROR-EVENT", "stream-error-event"),
    _p("STREAM-CONSISTENT-IDS", "stream-id-changes"),
    _p("STREAM-INDEXES", "stream-index-zero"),
    _p("STREAM-FINISH", "stream-no-finish-reason"),
    # The sixth batch of tracker shapes (issue 33) and the misses vLLM showed (issue 34).
    _p("LOGPROBS-OFFSETS", "text-offset-bytes"),
    _p("STOP-ABSENT", "stop-head-kept"),
    _p("STREAM-STOP-ABSENT", "stream-stop-head-kept"),
    _p("ECHO-PREFIX", "prompt-cut-at-nul"),
    _p("STREAM-FINISH", "stream-cut-after-first-chunk"),
    _p("INVALID-REJECTED", "best-of-ignored"),
    _p("VALID-NO-5XX", "intermittent-500-streamed-logprobs"),
    _p("STREAM-FINISH-ENUM", "finish-enum"),
    _p("STREAM-USAGE", "stream-usage-missing"),
    _p("STREAM-USAGE-UNREQUESTED", "stream-usage-unrequested"),
    _p("STREAM-MAX-TOKENS", "exceed-max-tokens"),
    _p("STREAM-FINISH-LENGTH", "finish-not-length"),
    _p("STREAM-STOP-ABSENT", "stop-in-text"),
    _p("STREAM-ECHO-PREFIX", "echo-ignored"),
    _p("STREAM-LOGPROBS-PRESENCE", "logprobs-ignored"),
    _p("STREAM-LOGPROBS-SHAPE", "logprobs-length-mismatch"),
    _p("STREAM-LOGPROBS-VALUES", "logprobs-positive"),
    _p("STREAM-LOGPROBS-TOP-COUNT", "top-logprobs-extra"),
    _p("LOGPROBS-TOP-FULL", "top-logprobs-short"),
    _p("STREAM-LOGPROBS-TOP-FULL", "top-logprobs-short"),
    _p("STREAM-LOGPROBS-OFFSETS", "stream-text-offset-stalled"),
    # Attribution: cumulative logprobs are not summed into a STREAM-MAX-TOKENS overrun.
    _p("STREAM-LOGPROBS-OFFSETS", "stream-logprobs-cumulative"),
    _p("STREAM-MATCHES-NONSTREAM", "stream-text-differs"),
    _p("SDK-COMPLETION", "schema-choices-not-array"),
    _p("SDK-STREAM", "stream-not-json"),
    # Misses closed (issue 20): checks.invariants and the probes beside it.
    _p("USAGE-PROMPT-TOKENS-N", "usage-prompt-per-choice"),
    _p("STREAM-USAGE-MATCHES", "stream-usage-counts-less"),
    # Attribution: a usage chunk over max_tokens is STREAM-MAX-TOKENS' alone.
    _p("STREAM-MAX-TOKENS", "stream-usage-counts-more"),
    _p("RATE-LIMIT-ENVELOPE", "rate-limit-bare-body"),
    _p("RETRY-AFTER-FORMAT", "rate-limit-retry-after-negative"),
    _p("TARGET-ALIVE", "dies-on-one-item-prompt-list"),
    _p("HTTP-CONTENT-ENCODING", "content-encoding-false-gzip"),
    # The edge token ids (strategies/_edge.py): out of vocabulary, refused with a 5xx.
    _p("VALID-NO-5XX", "token-id-out-of-vocab-500"),
    _p("MAX-TOKENS-DEFAULT", "max-tokens-default-ignored"),
    _p("ECHO-LOGPROBS-PROMPT", "echo-logprobs-completion-only"),
    # Issue 25's defect shapes (CONTRACT_SHAPES): streamed text, usage chunks, placement.
    _p("STREAM-TEXT-INTACT", "stream-text-cumulative"),
    _p("STREAM-TEXT-INTACT", "stream-leading-space-dropped"),
    _p("STREAM-TEXT-INTACT", "stream-utf8-replaced"),
    _p("STREAM-USAGE", "stream-usage-twice"),
    _p("CHOICES-INDEX", "choices-choice-major"),
    _p("STREAM-INDEXES", "choices-choice-major"),
    _p("CHOICES-INDEX", "choices-finish-order"),
    _p("FINISH-LENGTH", "stop-finish-length"),
    _p("USAGE-MAX-TOKENS", "max-tokens-zero-unlimited"),
    _p("SUFFIX-ABSENT", "suffix-appended"),
    _p("STREAM-SUFFIX-ABSENT", "suffix-appended"),
)

#: Issue 25's defect shapes, each with the fault of the reference target that reproduces
#: it: each must fail the run under every flavor (and under --spec openai), by the
#: requirement that owns it (EXACT). "Prompt-major" is read as the issue's name for a
#: placement that is not OpenAI's i × n + j: the fault puts choice j of prompt i at
#: j × prompts + i.
CONTRACT_SHAPES: tuple[tuple[str, str], ...] = (
    ("`max_tokens` exceeded", "exceed-max-tokens"),
    ("a stop sequence ignored", "stop-ignored"),
    ("a stop sequence included in the text", "stop-in-text"),
    ("echo ignored", "echo-ignored"),
    ("a stream that leaves out the echoed prompt", "echo-ignored"),
    ("more logprobs than asked for", "top-logprobs-extra"),
    ("`total_tokens` not equal to prompt plus completion", "usage-arithmetic"),
    ("a stream whose chunks carry the cumulative text", "stream-text-cumulative"),
    ("a stream that drops each token's leading spaces", "stream-leading-space-dropped"),
    ("a stream that corrupts multi-byte UTF-8 into U+FFFD", "stream-utf8-replaced"),
    ("the choices of `n` returned prompt-major", "choices-choice-major"),
    ("choices of a prompt list indexed in finish order", "choices-finish-order"),
    ("no usage chunk despite `include_usage`", "stream-usage-missing"),
    ("two usage chunks despite `include_usage`", "stream-usage-twice"),
    ("prompt tokens counted once per choice", "usage-prompt-per-choice"),
    ("a stop honoured but reported as `length`", "stop-finish-length"),
    ('`max_tokens: 0` answered as "no limit"', "max-tokens-zero-unlimited"),
    ("the request's `suffix` appended to the text", "suffix-appended"),
    ("`created` in milliseconds", "created-millis"),
    ("a stream id that changes between chunks", "stream-id-changes"),
)


# Legal variations: a correct suite reports no finding on them, under either flavor (and
# under OpenAI's own document: tests/test_contract.py runs each of them there too).
TOLERANCE: tuple[tuple[str, str], ...] = tuple(
    (fault, flavor)
    for fault in sorted(TOLERATED | {"rate-limit-every-third"})
    for flavor in FLAVORS
)


def runs() -> list[tuple[str, str, tuple[str, ...]]]:
    """Every (fault, flavor, suite options) the corpus runs the suite for."""
    keys = sorted({p.key for p in PROOFS})
    return [(fault, flavor, args) for fault, args in keys for flavor in FLAVORS]


def unproven(registered: Collection[str]) -> list[str]:
    """One line per registered requirement no proof proves, and per proof of a requirement
    no longer registered, each naming the file to change (ARCHITECTURE.md, "Add a
    requirement")."""
    proven = {p.requirement for p in PROOFS}
    return [
        f"{rid} has no proving fault: add _p({rid!r}, FAULT, FLAVOR) to PROOFS in "
        f"{PROOFS_FILE} (the fault: a registry.fault in conformance/reference/faults_*.py), "
        f"then measure its exact set into {EXACT_FILE}"
        for rid in sorted(set(registered) - proven)
    ] + [
        f"{rid} is proven in {PROOFS_FILE} but not registered: remove its proof"
        for rid in sorted(proven - set(registered))
    ]


def unknown_faults() -> set[str]:
    """Fault names used here that the reference target does not have (a typo guard)."""
    return {p.fault for p in PROOFS} - set(FAULTS)


def render_proof_table(levels: dict[str, str]) -> str:
    """docs/proof.md: requirement × the fault that proves it, from PROOFS and EXACT."""
    return proof_table.render(levels, PROOFS, EXACT, TOLERANCE)


def measure(
    run: Callable[[str, str, tuple[str, ...]], frozenset[str]], only: Collection[str] = ()
) -> str:
    """``EXACT`` as Python source, from ``run(fault, flavor, args)`` -> failed IDs (only the
    faults named in ``only``, when given: entries to paste over their old ones)."""
    keys = sorted({p.key for p in PROOFS if not only or p.fault in only})
    return proof_table.exact_source(keys, FLAVORS, run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the requirement proof table.")
    parser.add_argument("--write", action="store_true", help="write docs/proof.md")
    parser.add_argument(
        "--measure", action="store_true", help="run the suite per fault and print EXACT"
    )
    parser.add_argument(
        "--only", nargs="+", default=(), metavar="FAULT", help="with --measure: these faults"
    )
    args = parser.parse_args(argv)
    if args.measure:
        sys.stdout.write(measure(proof_table.run_suite, args.only))
        return 0
    text = render_proof_table(proof_table.levels())
    if args.write:
        path = Path("docs/proof.md")
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
