"""How a run ends: the one table of verdict words, exit codes and what each means.

Every front door imports it: the pytest plugin and ``completions-conformance`` (the run),
``conformance-merge``, ``conformance-compare``, ``completions-conformance gate``, ``judge``
and ``proxy``, the reference target's command line, and the reports that explain a verdict.
The same condition gives the same word and code whichever door it came through
(tests/test_outcomes.py runs each). A leaf: importing it loads nothing else of the suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Word(StrEnum):
    """A run's verdict word, as ``decide()`` gives it (results.json ``meta.verdict``)."""

    PASSED = "passed"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    NO_VERDICT = "no-verdict"
    ERROR = "error"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One way a run (or a command) ends."""

    word: str
    exit_code: int
    #: When it is given, as the help page says (one line).
    when: str
    #: What it means, as a report says it to its reader (None: no report is written).
    meaning: str | None
    #: What a shard's report says of its own slice in place of the run's word.
    in_a_shard: str | None = None


OUTCOMES = (
    Outcome(
        "passed", 0,
        "every MUST that applies was exercised and held, or has a stated reason",
        "Every requirement that decides the verdict was tested and held, or has a stated "
        "reason why it could not apply (listed under Not tested).",
        "nothing failed",
    ),
    Outcome(
        "failed", 1,
        "a MUST failed (a SHOULD too with --strict-should), or a required capability is missing",
        "A requirement that decides the verdict failed.",
        "a requirement that decides the verdict failed",
    ),
    Outcome(
        "error", 3,
        "the suite itself broke (a check raised, a suite test errored)",
        "A check of the suite raised or a suite test broke.",
        "a check of the suite raised or a suite test broke",
    ),
    Outcome(
        "bad-input", 4,
        "one ERROR: line: unknown spec, unreachable URL, failed preflight, bad option or file",
        None,
    ),
    Outcome(
        "no-verdict", 6,
        "the target kept rate-limiting after the retries",
        "The target kept answering 429 after retries: no verdict was reached.",
        "the target kept answering 429",
    ),
    Outcome(
        "incomplete", 7,
        "a MUST was never exercised and has no stated reason (or the budget ran out)",
        "Nothing failed, but MUST requirements were left untested or scenarios not run (the "
        "budget, a missing generator): not a pass.",
        "scenarios were not run (see below)",
    ),
    # 130 is what a shell reports for a command ended by SIGINT (128 + 2), so a script
    # that reads the status sees a Ctrl-C as one, whether the reports were written or not.
    Outcome(
        "interrupted", 130,
        "Ctrl-C stopped the run: the reports hold what was judged until then",
        "The run was interrupted (Ctrl-C) before it ended: what it judged until then is "
        "reported, but it is not a verdict on the target.",
        "the shard was interrupted",
    ),
)  # fmt: skip

#: Word -> exit code, for every way a run or command ends.
EXIT_CODES = {o.word: o.exit_code for o in OUTCOMES}
#: The words ``decide()`` gives (a run that started); "bad-input" ends a run before that.
WORDS = tuple(Word)
#: A report's sentence for each verdict it can carry.
MEANINGS = {o.word: o.meaning for o in OUTCOMES if o.meaning is not None}
#: A shard's sentence about its own slice.
SHARD_MEANINGS = {o.word: o.in_a_shard for o in OUTCOMES if o.in_a_shard is not None}

BAD_INPUT = EXIT_CODES["bad-input"]
ERROR = EXIT_CODES["error"]
NO_VERDICT = EXIT_CODES["no-verdict"]
INTERRUPTED = EXIT_CODES["interrupted"]
