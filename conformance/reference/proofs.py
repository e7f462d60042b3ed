"""The fault corpus: for every requirement, the reference-target fault that proves it can fail.

Each :class:`Proof` names a requirement, the fault of the reference target that violates
it, the flavor (spec) to run under, extra suite options, and the other requirements that
the same fault breaks by its nature (``also``: a `choices` object is both a schema
violation and a wrong choice count). The project's tests run the whole suite against each
proof's faulty target and assert that the requirement fails (a CAPABILITY requirement:
is reported unsupported) and that no MUST requirement outside ``also`` fails. They also
run the suite against every legal variation in ``TOLERANCE`` and assert no finding at
all, and that every registered requirement has a proof here.

``python -m conformance.reference.proofs --write`` regenerates docs/proof.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from conformance.reference.faults import FAULTS, TOLERATED


@dataclass(frozen=True, slots=True)
class Proof:
    """A requirement, and the faulty reference target that must make it fail."""

    requirement: str
    fault: str
    flavor: str = "aihubmix"
    args: tuple[str, ...] = ()
    also: frozenset[str] = frozenset()


def _p(
    requirement: str, fault: str, flavor: str = "aihubmix", *also: str, args: tuple[str, ...] = ()
) -> Proof:
    return Proof(requirement, fault, flavor, args, frozenset(also))


PROOFS: tuple[Proof, ...] = (
    # transport and schema
    _p(
        "HTTP-COMPLETE",
        "stream-stall",
        "aihubmix",
        "STREAM-DONE",
        "STREAM-FINISH",
        "STREAM-INDEXES",
        "STREAM-USAGE",
        "SDK-STREAM",
        args=("--stream-gap", "0.5"),
    ),
    _p("HTTP-STATUS-DECLARED", "errors-422"),
    _p("RESP-CONTENT-TYPE", "json-content-type-text"),
    _p("RESP-SCHEMA", "schema-choices-not-array", "aihubmix", "CHOICES-COUNT", "SDK-COMPLETION"),
    _p("RESP-HEADERS-REQUIRED", "missing-request-id-header", "nscale"),
    _p("RESP-OBJECT", "object-chunk", "nscale"),
    _p("RESP-CREATED", "created-millis"),
    _p("RESP-ID", "empty-id"),
    _p("RESP-CHOICE-TEXT", "choice-text-null", "aihubmix", "RESP-SCHEMA", "SDK-COMPLETION"),
    _p("RESP-NULL-FIELDS", "null-fields", "nscale"),
    # request-aware semantics
    _p("CHOICES-COUNT", "choices-ignore-n", "aihubmix", "STREAM-INDEXES", "SDK-STREAM"),
    _p("CHOICES-INDEX", "duplicate-index"),
    _p("USAGE-TOTAL", "usage-arithmetic", "aihubmix", "STREAM-USAGE"),
    _p("USAGE-MAX-TOKENS", "exceed-max-tokens", "aihubmix", "STREAM-MAX-TOKENS"),
    _p("FINISH-LENGTH", "finish-not-length", "aihubmix", "STREAM-FINISH-LENGTH"),
    _p(
        "FINISH-ENUM",
        "finish-enum",
        "aihubmix",
        "RESP-SCHEMA",
        "STREAM-FINISH-ENUM",
        "STREAM-CHUNK-SCHEMA",
        # eos_token also replaces the "length" that a max_tokens cut-off owes
        "FINISH-LENGTH",
        "STREAM-FINISH-LENGTH",
    ),
    _p("ECHO-PREFIX", "echo-ignored", "aihubmix", "STREAM-ECHO-PREFIX"),
    _p("LOGPROBS-PRESENCE", "logprobs-ignored", "aihubmix", "STREAM-LOGPROBS"),
    _p("LOGPROBS-SHAPE", "logprobs-length-mismatch", "aihubmix", "STREAM-LOGPROBS"),
    _p("LOGPROBS-VALUES", "logprobs-positive", "aihubmix", "STREAM-LOGPROBS"),
    _p("LOGPROBS-TOP-COUNT", "top-logprobs-extra", "aihubmix", "STREAM-LOGPROBS"),
    _p("LOGPROBS-OFFSETS", "text-offset-decreasing"),
    _p("LOGPROBS-TOKENS-TEXT", "tokens-mismatch-text"),
    _p("STOP-ABSENT", "stop-in-text", "aihubmix", "STREAM-STOP-ABSENT"),
    _p("STOP-PROBE", "stop-ignored", "aihubmix", "STOP-ABSENT", "STREAM-STOP-ABSENT"),
    _p("VALID-NO-5XX", "capability-500"),
    _p("VALID-ACCEPTED", "reject-token-prompts"),
    _p("INVALID-REJECTED", "accepts-invalid"),
    # errors and auth
    _p("ERROR-ENVELOPE", "errors-fastapi"),
    _p("ERROR-CONTENT-TYPE", "errors-text-plain", "aihubmix", "ERROR-ENVELOPE"),
    _p("AUTH-REQUIRED", "auth-ignored"),
    _p("MODEL-NOT-FOUND", "unknown-model-200"),
    _p("REQUEST-ID-HEADER", "missing-request-id-header", "aihubmix"),
    # streaming
    _p("STREAM-CONTENT-TYPE", "stream-content-type-json", "aihubmix", "SDK-STREAM"),
    # The SDK cannot read merged events either.
    _p("STREAM-FRAMING", "stream-single-newline", "aihubmix", "STREAM-CHUNK-SCHEMA", "SDK-STREAM"),
    _p("STREAM-CHUNK-SCHEMA", "stream-not-json", "aihubmix", "SDK-STREAM"),
    _p("STREAM-DONE", "stream-no-done"),
    _p("STREAM-ERROR-EVENT", "stream-error-event", "aihubmix", "STREAM-CHUNK-SCHEMA", "SDK-STREAM"),
    _p("STREAM-CONSISTENT-IDS", "stream-id-changes"),
    _p("STREAM-INDEXES", "stream-index-zero", "aihubmix", "STREAM-FINISH", "SDK-STREAM"),
    _p("STREAM-FINISH", "stream-no-finish-reason"),
    _p(
        "STREAM-FINISH-ENUM",
        "finish-enum",
        "aihubmix",
        "RESP-SCHEMA",
        "FINISH-ENUM",
        "STREAM-CHUNK-SCHEMA",
        "FINISH-LENGTH",
        "STREAM-FINISH-LENGTH",
    ),
    _p("STREAM-USAGE", "stream-usage-missing"),
    _p("STREAM-USAGE-UNREQUESTED", "stream-usage-unrequested"),
    _p("STREAM-MAX-TOKENS", "exceed-max-tokens", "aihubmix", "USAGE-MAX-TOKENS"),
    _p("STREAM-FINISH-LENGTH", "finish-not-length", "aihubmix", "FINISH-LENGTH"),
    _p("STREAM-STOP-ABSENT", "stop-in-text", "aihubmix", "STOP-ABSENT"),
    _p("STREAM-ECHO-PREFIX", "echo-ignored", "aihubmix", "ECHO-PREFIX"),
    _p("STREAM-LOGPROBS", "logprobs-positive", "aihubmix", "LOGPROBS-VALUES"),
    _p("STREAM-MATCHES-NONSTREAM", "stream-text-differs"),
    # SDK compatibility
    # The SDK iterates `choices` and cannot read an object keyed by index.
    _p("SDK-COMPLETION", "schema-choices-not-array", "aihubmix", "RESP-SCHEMA", "CHOICES-COUNT"),
    _p("SDK-STREAM", "stream-not-json", "aihubmix", "STREAM-CHUNK-SCHEMA"),
)

# Legal variations: a correct suite reports no finding on them, under either flavor.
TOLERANCE: tuple[tuple[str, str], ...] = tuple(
    (fault, flavor)
    for fault in sorted(TOLERATED | {"rate-limit-every-third"})
    for flavor in ("aihubmix", "nscale")
)


def unknown_faults() -> set[str]:
    """Fault names used here that the reference target does not have (a typo guard)."""
    return {p.fault for p in PROOFS} - set(FAULTS)


def render_proof_table(levels: dict[str, str]) -> str:
    """docs/proof.md: requirement × the fault that proves it, from PROOFS."""
    lines = [
        "# Proof of every requirement",
        "",
        "Generated by `python -m conformance.reference.proofs --write` from",
        "`conformance/reference/proofs.py`; `tests/test_fault_corpus.py` runs the whole suite",
        "against each faulty reference target and keeps this table honest: the requirement",
        "must fail (CAPABILITY: be reported unsupported), and no MUST requirement outside",
        '"also breaks" may fail. Legal variations at the end must produce no finding at all.',
        "",
        "| requirement | level | proving fault | flavor | suite options | also breaks | result |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in sorted(PROOFS, key=lambda p: p.requirement):
        level = levels.get(p.requirement, "?")
        result = "reported unsupported" if level == "CAPABILITY" else "fails"
        lines.append(
            f"| {p.requirement} | {level} | `{p.fault}` | {p.flavor} | "
            f"{' '.join(p.args) or '-'} | {', '.join(sorted(p.also)) or '-'} | {result} |"
        )
    lines += [
        "",
        "## Legal variations (no finding)",
        "",
        "| fault | flavors | result |",
        "| --- | --- | --- |",
    ]
    for fault in sorted({f for f, _ in TOLERANCE}):
        flavors = ", ".join(fl for f, fl in TOLERANCE if f == fault)
        lines.append(f"| `{fault}` | {flavors} | no finding |")
    return "\n".join(lines) + "\n"


def _levels() -> dict[str, str]:
    from conformance.requirements import REGISTRY, load_checks

    load_checks()
    return {rid: r.level.value for rid, r in REGISTRY.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the requirement proof table.")
    parser.add_argument("--write", action="store_true", help="write docs/proof.md")
    args = parser.parse_args(argv)
    text = render_proof_table(_levels())
    if args.write:
        path = Path("docs/proof.md")
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
