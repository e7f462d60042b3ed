"""The exact sets: what fails, at any level, when the whole suite meets each fault.

For each fault of conformance/front/proofs.py's ``PROOFS`` (with its suite options) and
each flavor, ``EXACT`` is the set of requirements that fail. Measured, not written by hand:
``python -m conformance.front.proofs --measure [--only FAULT...]`` prints it as source to
paste over this table (or over the entries of the faults named) after a check changes on
purpose. "One defect, one finding" is the goal: a set larger than the proved requirement is
collateral made visible, each kept one with a comment saying why.
"""

from __future__ import annotations

from collections.abc import Mapping


def _s(*ids: str) -> frozenset[str]:
    return frozenset(ids)


#: Exact failures (any level) of the whole suite against each fault, per flavor. Measured;
#: regenerate with ``python -m conformance.front.proofs --measure`` when a check changes.
EXACT: Mapping[tuple[str, tuple[str, ...]], Mapping[str, frozenset[str]]] = {
    ("accepts-invalid", ()): {
        "aihubmix": _s("INVALID-REJECTED"),
        "nscale": _s("INVALID-REJECTED"),
    },
    ("auth-ignored", ()): {
        "aihubmix": _s("AUTH-REQUIRED"),
        "nscale": _s("AUTH-REQUIRED"),
    },
    ("capability-500", ()): {
        "aihubmix": _s("VALID-NO-5XX"),
        "nscale": _s("VALID-NO-5XX"),
    },
    # RESP-SCHEMA leaves a choice's text to RESP-CHOICE-TEXT (one defect, one finding).
    ("choice-text-null", ()): {
        "aihubmix": _s("RESP-CHOICE-TEXT"),
        "nscale": _s("RESP-CHOICE-TEXT"),
    },
    # Kept: the fault breaks both modes, and each mode has its owner (CHOICES-COUNT for bodies,
    # STREAM-INDEXES for streams): a server can honour n in one mode and not the other.
    ("choices-ignore-n", ()): {
        "aihubmix": _s("CHOICES-COUNT", "STREAM-INDEXES"),
        "nscale": _s("CHOICES-COUNT", "STREAM-INDEXES"),
    },
    # The prompt over the advertised window is a probe of its own (an invalid case with a
    # free-text reason): served, it is judged by CONTEXT-WINDOW-REJECTED alone.
    ("context-window-ignored", ()): {
        "aihubmix": _s("CONTEXT-WINDOW-REJECTED"),
        "nscale": _s("CONTEXT-WINDOW-REJECTED"),
    },
    ("created-millis", ()): {
        "aihubmix": _s("RESP-CREATED"),
        "nscale": _s("RESP-CREATED"),
    },
    ("duplicate-index", ()): {
        "aihubmix": _s("CHOICES-INDEX"),
        "nscale": _s("CHOICES-INDEX"),
    },
    ("echo-ignored", ()): {
        "aihubmix": _s("ECHO-PREFIX", "STREAM-ECHO-PREFIX"),
        "nscale": _s("ECHO-PREFIX", "STREAM-ECHO-PREFIX"),
    },
    ("empty-id", ()): {
        "aihubmix": _s("RESP-ID"),
        "nscale": _s("RESP-ID"),
    },
    ("errors-422", ()): {
        "aihubmix": _s("HTTP-4XX-DECLARED"),
        "nscale": _s("HTTP-4XX-DECLARED"),
    },
    ("stream-status-201", ()): {
        "aihubmix": _s("HTTP-STATUS-DECLARED"),
        "nscale": _s("HTTP-STATUS-DECLARED"),
    },
    ("errors-fastapi", ()): {
        "aihubmix": _s("ERROR-ENVELOPE"),
        "nscale": _s("ERROR-ENVELOPE"),
    },
    ("errors-stringified-nulls", ()): {
        "aihubmix": _s("ERROR-ENVELOPE"),
        "nscale": _s("ERROR-ENVELOPE"),
    },
    ("errors-text-plain", ()): {
        "aihubmix": _s("ERROR-CONTENT-TYPE"),
        "nscale": _s("ERROR-CONTENT-TYPE"),
    },
    # MAX-TOKENS-DEFAULT kept: the one request without max_tokens runs past the declared
    # default, and no other requirement judges that request (aihubmix declares the default).
    ("exceed-max-tokens", ()): {
        "aihubmix": _s("MAX-TOKENS-DEFAULT", "STREAM-MAX-TOKENS", "USAGE-MAX-TOKENS"),
        "nscale": _s("STREAM-MAX-TOKENS", "USAGE-MAX-TOKENS"),
    },
    # aihubmix: the enum violation is FINISH-ENUM's / STREAM-FINISH-ENUM's alone (RESP-SCHEMA,
    # STREAM-CHUNK-SCHEMA, FINISH-LENGTH and STOP-PROBE leave an out-of-enum value to them).
    # nscale: kept. Nscale declares no enum, so no FINISH-ENUM; "eos_token" where "length" is
    # due (max_tokens reached) is the one finding FINISH-LENGTH exists for, per mode, and
    # where "stop" is due (the stop probe) STOP-PROBE's: two markers, each wrong.
    ("finish-enum", ()): {
        "aihubmix": _s("FINISH-ENUM", "STREAM-FINISH-ENUM"),
        "nscale": _s("FINISH-LENGTH", "STOP-PROBE", "STREAM-FINISH-LENGTH"),
    },
    ("finish-not-length", ()): {
        "aihubmix": _s("FINISH-LENGTH", "STREAM-FINISH-LENGTH"),
        "nscale": _s("FINISH-LENGTH", "STREAM-FINISH-LENGTH"),
    },
    ("json-content-type-text", ()): {
        "aihubmix": _s("RESP-CONTENT-TYPE"),
        "nscale": _s("RESP-CONTENT-TYPE"),
    },
    # Nscale declares `logprobs: default: 0`; a server applying it breaks nothing there.
    ("logprobs-declared-default", ()): {
        "aihubmix": _s("LOGPROBS-PRESENCE", "STREAM-LOGPROBS-PRESENCE"),
        "nscale": _s(),
    },
    ("logprobs-ignored", ()): {
        "aihubmix": _s("LOGPROBS-PRESENCE", "STREAM-LOGPROBS-PRESENCE"),
        "nscale": _s("LOGPROBS-PRESENCE", "STREAM-LOGPROBS-PRESENCE"),
    },
    ("logprobs-length-mismatch", ()): {
        "aihubmix": _s("LOGPROBS-SHAPE", "STREAM-LOGPROBS-SHAPE"),
        "nscale": _s("LOGPROBS-SHAPE", "STREAM-LOGPROBS-SHAPE"),
    },
    ("logprobs-positive", ()): {
        "aihubmix": _s("LOGPROBS-VALUES", "STREAM-LOGPROBS-VALUES"),
        "nscale": _s("LOGPROBS-VALUES", "STREAM-LOGPROBS-VALUES"),
    },
    ("missing-request-id-header", ()): {
        "aihubmix": _s("REQUEST-ID-HEADER"),
        "nscale": _s("RESP-HEADERS-REQUIRED"),
    },
    # Under the openai-compatible contract the fault's only null, a choice's logprobs, is
    # OpenAI's own answer: the document contract holds the target to Nscale's schema.
    ("null-fields", ("--contract", "document")): {
        "aihubmix": _s(),
        "nscale": _s("RESP-NULL-FIELDS"),
    },
    # RESP-SCHEMA leaves `object` to RESP-OBJECT (aihubmix's enum; nscale types it a string).
    ("object-chunk", ()): {
        "aihubmix": _s("RESP-OBJECT"),
        "nscale": _s("RESP-OBJECT"),
    },
    ("reject-token-prompts", ()): {
        "aihubmix": _s(),
        "nscale": _s(),
    },
    # CHOICES-COUNT counts only a choices array (a non-array is RESP-SCHEMA's). SDK-COMPLETION
    # kept: the official SDK failing on the answer is the client-visible finding the SDK-*
    # requirements exist for, judged on the SDK's own exchange (as SDK-STREAM beside each
    # stream framing fault).
    ("schema-choices-not-array", ()): {
        "aihubmix": _s("RESP-SCHEMA", "SDK-COMPLETION"),
        "nscale": _s("RESP-SCHEMA", "SDK-COMPLETION"),
    },
    # The stop probe's answer holds its stop sequence: STOP-ABSENT's finding, not also
    # STOP-PROBE's (one defect, one finding on the one exchange).
    ("stop-ignored", ()): {
        "aihubmix": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
        "nscale": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
    },
    ("stop-in-text", ()): {
        "aihubmix": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
        "nscale": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
    },
    # Both modes miss the stop across two words (a word's own stop is matched); the probe's
    # answer holds that stop: STOP-ABSENT's finding, not also STOP-PROBE's.
    ("stop-inside-one-token", ()): {
        "aihubmix": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
        "nscale": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
    },
    ("stream-content-type-json", ()): {
        "aihubmix": _s("SDK-STREAM", "STREAM-CONTENT-TYPE"),
        "nscale": _s("SDK-STREAM", "STREAM-CONTENT-TYPE"),
    },
    ("stream-error-event", ()): {
        "aihubmix": _s("SDK-STREAM", "STREAM-ERROR-EVENT"),
        "nscale": _s("SDK-STREAM", "STREAM-ERROR-EVENT"),
    },
    ("stream-event-type", ()): {
        "aihubmix": _s("STREAM-DATA-ONLY"),
        "nscale": _s("STREAM-DATA-ONLY"),
    },
    ("stream-id-changes", ()): {
        "aihubmix": _s("STREAM-CONSISTENT-IDS"),
        "nscale": _s("STREAM-CONSISTENT-IDS"),
    },
    ("stream-index-zero", ()): {
        "aihubmix": _s("STREAM-INDEXES"),
        "nscale": _s("STREAM-INDEXES"),
    },
    # One finding: STREAM-MAX-TOKENS and USAGE-COMPLETION-TOKENS would count the summed
    # logprobs; conformance.judging.verdict.attribution withholds them once the offsets show them wrong.
    ("stream-logprobs-cumulative", ()): {
        "aihubmix": _s("STREAM-LOGPROBS-OFFSETS"),
        "nscale": _s("STREAM-LOGPROBS-OFFSETS"),
    },
    ("stream-no-done", ()): {
        "aihubmix": _s("STREAM-DONE"),
        "nscale": _s("STREAM-DONE"),
    },
    ("stream-no-finish-reason", ()): {
        "aihubmix": _s("STREAM-FINISH"),
        "nscale": _s("STREAM-FINISH"),
    },
    ("stream-not-json", ()): {
        "aihubmix": _s("SDK-STREAM", "STREAM-CHUNK-SCHEMA"),
        "nscale": _s("SDK-STREAM", "STREAM-CHUNK-SCHEMA"),
    },
    ("stream-single-newline", ()): {
        "aihubmix": _s("SDK-STREAM", "STREAM-FRAMING"),
        "nscale": _s("SDK-STREAM", "STREAM-FRAMING"),
    },
    ("stream-stall", ("--stream-gap", "0.5")): {
        "aihubmix": _s("HTTP-COMPLETE"),
        "nscale": _s("HTTP-COMPLETE"),
    },
    ("stream-text-differs", ()): {
        "aihubmix": _s("STREAM-MATCHES-NONSTREAM"),
        "nscale": _s("STREAM-MATCHES-NONSTREAM"),
    },
    ("stream-text-offset-stalled", ()): {
        "aihubmix": _s("STREAM-LOGPROBS-OFFSETS"),
        "nscale": _s("STREAM-LOGPROBS-OFFSETS"),
    },
    ("stream-usage-missing", ()): {
        "aihubmix": _s("STREAM-USAGE"),
        "nscale": _s("STREAM-USAGE"),
    },
    ("stream-usage-unrequested", ()): {
        "aihubmix": _s("STREAM-USAGE-UNREQUESTED"),
        "nscale": _s("STREAM-USAGE-UNREQUESTED"),
    },
    ("text-offset-decreasing", ()): {
        "aihubmix": _s("LOGPROBS-OFFSETS"),
        "nscale": _s("LOGPROBS-OFFSETS"),
    },
    ("tokens-mismatch-text", ()): {
        "aihubmix": _s("LOGPROBS-TOKENS-TEXT"),
        "nscale": _s("LOGPROBS-TOKENS-TEXT"),
    },
    ("top-logprobs-extra", ()): {
        "aihubmix": _s("LOGPROBS-TOP-COUNT", "STREAM-LOGPROBS-TOP-COUNT"),
        "nscale": _s("LOGPROBS-TOP-COUNT", "STREAM-LOGPROBS-TOP-COUNT"),
    },
    ("top-logprobs-short", ()): {
        "aihubmix": _s("LOGPROBS-TOP-FULL", "STREAM-LOGPROBS-TOP-FULL"),
        "nscale": _s("LOGPROBS-TOP-FULL", "STREAM-LOGPROBS-TOP-FULL"),
    },
    ("unknown-model-200", ()): {
        "aihubmix": _s("MODEL-NOT-FOUND"),
        "nscale": _s("MODEL-NOT-FOUND"),
    },
    ("unknown-model-400", ()): {
        "aihubmix": _s("MODEL-NOT-FOUND-404"),
        "nscale": _s("MODEL-NOT-FOUND-404"),
    },
    # Kept: the fault breaks both modes' usage objects; USAGE-TOTAL owns the body's arithmetic,
    # STREAM-USAGE the usage chunk's (a server can get one right and not the other).
    ("usage-arithmetic", ()): {
        "aihubmix": _s("STREAM-USAGE", "USAGE-TOTAL"),
        "nscale": _s("STREAM-USAGE", "USAGE-TOTAL"),
    },
    # On the echo:tokens capability probe no visible witness (an echoed token-id prompt)
    # contradicts the zero count, so FINISH-LENGTH would read "length after 0 tokens" from
    # usage that USAGE-COMPLETION-TOKENS shows wrong: the attribution pass withholds it.
    ("usage-completion-short", ()): {
        "aihubmix": _s("USAGE-COMPLETION-TOKENS"),
        "nscale": _s("USAGE-COMPLETION-TOKENS"),
    },
    # FastChat's loop index: (STREAM-)FINISH-LENGTH counted by usage are withheld once
    # logprobs of other answers show usage one short (conformance.judging.verdict.attribution).
    ("usage-completion-off-by-one", ()): {
        "aihubmix": _s("USAGE-COMPLETION-TOKENS"),
        "nscale": _s("USAGE-COMPLETION-TOKENS"),
    },
    ("usage-prompt-zero", ()): {
        "aihubmix": _s("USAGE-PROMPT-TOKENS"),
        "nscale": _s("USAGE-PROMPT-TOKENS"),
    },
    # -- misses closed (issue 20) --
    ("usage-prompt-per-choice", ()): {
        "aihubmix": _s("USAGE-PROMPT-TOKENS-N"),
        "nscale": _s("USAGE-PROMPT-TOKENS-N"),
    },
    # A usage chunk counting more than max_tokens (9 for 8) is STREAM-MAX-TOKENS' alone:
    # the answer claims more than the bound (STREAM-USAGE-MATCHES leaves it).
    ("stream-usage-counts-more", ()): {
        "aihubmix": _s("STREAM-MAX-TOKENS"),
        "nscale": _s("STREAM-MAX-TOKENS"),
    },
    # One fewer than the same request non-streamed: STREAM-USAGE-MATCHES; the usage chunk
    # shown wrong, STREAM-FINISH-LENGTH does not read "length after 7 of 8" from it.
    ("stream-usage-counts-less", ()): {
        "aihubmix": _s("STREAM-USAGE-MATCHES"),
        "nscale": _s("STREAM-USAGE-MATCHES"),
    },
    ("rate-limit-bare-body", ()): {
        "aihubmix": _s("RATE-LIMIT-ENVELOPE"),
        "nscale": _s("RATE-LIMIT-ENVELOPE"),
    },
    ("rate-limit-retry-after-negative", ()): {
        "aihubmix": _s("RETRY-AFTER-FORMAT"),
        "nscale": _s("RETRY-AFTER-FORMAT"),
    },
    # One finding: the answers after the death are not judged (no declined capability, no
    # VALID-ACCEPTED), and nothing more is sent.
    ("dies-on-one-item-prompt-list", ()): {
        "aihubmix": _s("TARGET-ALIVE"),
        "nscale": _s("TARGET-ALIVE"),
    },
    # The body, read as sent, is judged as usual; the SDK's failure on it is this defect's
    # (sdk.py: not a lost answer, not HTTP-COMPLETE's).
    ("content-encoding-false-gzip", ()): {
        "aihubmix": _s("HTTP-CONTENT-ENCODING"),
        "nscale": _s("HTTP-CONTENT-ENCODING"),
    },
    # LOGPROBS-TOKENS-TEXT kept for now (SHOULD): the tokens no longer spell the echoed text,
    # the same defect seen from the text; the attribution pass (issue 20 item 2) is where
    # it should defer to ECHO-LOGPROBS-PROMPT.
    ("echo-logprobs-completion-only", ()): {
        "aihubmix": _s("ECHO-LOGPROBS-PROMPT", "LOGPROBS-TOKENS-TEXT"),
        "nscale": _s("ECHO-LOGPROBS-PROMPT", "LOGPROBS-TOKENS-TEXT"),
    },
    # nscale declares no default for max_tokens: the requirement does not apply there.
    ("max-tokens-default-ignored", ()): {
        "aihubmix": _s("MAX-TOKENS-DEFAULT"),
        "nscale": _s(),
    },
    ("token-id-out-of-vocab-500", ()): {
        "aihubmix": _s("VALID-NO-5XX"),
        "nscale": _s("VALID-NO-5XX"),
    },
    # -- issue 25's defect shapes (CONTRACT_SHAPES) --
    # The twin's text shows each corruption for what it is: STREAM-MATCHES-NONSTREAM leaves
    # it. The faults keep the streamed logprobs consistent with the text sent.
    ("stream-text-cumulative", ()): {
        "aihubmix": _s("STREAM-TEXT-INTACT"),
        "nscale": _s("STREAM-TEXT-INTACT"),
    },
    ("stream-leading-space-dropped", ()): {
        "aihubmix": _s("STREAM-TEXT-INTACT"),
        "nscale": _s("STREAM-TEXT-INTACT"),
    },
    ("stream-utf8-replaced", ()): {
        "aihubmix": _s("STREAM-TEXT-INTACT"),
        "nscale": _s("STREAM-TEXT-INTACT"),
    },
    ("stream-usage-twice", ()): {
        "aihubmix": _s("STREAM-USAGE"),
        "nscale": _s("STREAM-USAGE"),
    },
    # Kept: both modes are placed wrong, and each mode has its owner (as choices-ignore-n).
    # The per-prompt checks (ECHO-PREFIX, ECHO-LOGPROBS-PROMPT) leave misplaced choices.
    ("choices-choice-major", ()): {
        "aihubmix": _s("CHOICES-INDEX", "STREAM-INDEXES"),
        "nscale": _s("CHOICES-INDEX", "STREAM-INDEXES"),
    },
    # Token-id prompts echoed out of place would read as uncovered prompts: that finding of
    # ECHO-LOGPROBS-PROMPT rests on witness "echo", which CHOICES-INDEX shows wrong.
    ("choices-finish-order", ()): {
        "aihubmix": _s("CHOICES-INDEX"),
        "nscale": _s("CHOICES-INDEX"),
    },
    # STOP-PROBE leaves a "length" that FINISH-LENGTH counts short of max_tokens to it.
    ("stop-finish-length", ()): {
        "aihubmix": _s("FINISH-LENGTH"),
        "nscale": _s("FINISH-LENGTH"),
    },
    # Kept: one owner per mode. A "stop" under max_tokens 0 on an echoed token-id prompt
    # (STREAM-FINISH-LENGTH) rests on witness "max-tokens-0", shown wrong by these two.
    ("max-tokens-zero-unlimited", ()): {
        "aihubmix": _s("STREAM-MAX-TOKENS", "USAGE-MAX-TOKENS"),
        "nscale": _s("STREAM-MAX-TOKENS", "USAGE-MAX-TOKENS"),
    },
    # Kept: one owner per mode. LOGPROBS-TOKENS-TEXT and the max_tokens 0 rule leave a text
    # that is the tokens (or nothing) and the suffix.
    ("suffix-appended", ()): {
        "aihubmix": _s("STREAM-SUFFIX-ABSENT", "SUFFIX-ABSENT"),
        "nscale": _s("STREAM-SUFFIX-ABSENT", "SUFFIX-ABSENT"),
    },
    # The sixth batch of tracker shapes (issue 33) and the misses vLLM showed (issue 34):
    # each in the mode(s) it breaks, by its owner alone; text_offset in bytes and the head of
    # a stop in both modes break each mode's requirement.
    ("best-of-ignored", ()): {
        "aihubmix": _s("INVALID-REJECTED"),
        "nscale": _s("INVALID-REJECTED"),
    },
    ("intermittent-500-streamed-logprobs", ()): {
        "aihubmix": _s("VALID-NO-5XX"),
        "nscale": _s("VALID-NO-5XX"),
    },
    ("prompt-cut-at-nul", ()): {
        "aihubmix": _s("ECHO-PREFIX"),
        "nscale": _s("ECHO-PREFIX"),
    },
    ("stop-head-kept", ()): {
        "aihubmix": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
        "nscale": _s("STOP-ABSENT", "STREAM-STOP-ABSENT"),
    },
    ("stream-cut-after-first-chunk", ()): {
        "aihubmix": _s("STREAM-FINISH"),
        "nscale": _s("STREAM-FINISH"),
    },
    ("stream-stop-head-kept", ()): {
        "aihubmix": _s("STREAM-STOP-ABSENT"),
        "nscale": _s("STREAM-STOP-ABSENT"),
    },
    ("text-offset-bytes", ()): {
        "aihubmix": _s("LOGPROBS-OFFSETS", "STREAM-LOGPROBS-OFFSETS"),
        "nscale": _s("LOGPROBS-OFFSETS", "STREAM-LOGPROBS-OFFSETS"),
    },
}
