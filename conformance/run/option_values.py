"""Every option value checked before the first request: bad input is the user's, not the target's.

A value the suite cannot honour (a negative count, a zero time bound, a misspelled
capability or requirement ID, ``--fuzz`` without its generator) would otherwise run and
pass on nothing, blame the target with findings the options caused, spend a whole run
before failing, or end in a traceback. :func:`problem` names the first such value in one
line: the option, the value, and what is accepted, in the words of the command line (a
runner-agnostic caller finds each option under its own name in Settings and Setup, except
Limits: ``ttfb`` is --request-timeout, ``gap`` --stream-gap, ``total`` --stream-total,
``max_bytes`` --max-body-bytes). The pytest plugin and ``run_suite`` both meet it through
``assembly.assemble``, which shows it as one ``ERROR:`` line (exit 4).

Runner-agnostic: no pytest, no spec loaded for the numbers (the names that depend on the
spec are checked once it is loaded, :func:`spec_problem`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conformance.judging.document.spec import Spec
    from conformance.run.session import Setup

#: The smallest --max-body-bytes: the suite's largest answers (echo of a prompt with
#: logprobs over n choices, a stream of them) are tens of KiB, so a smaller bound would
#: make a conformant target fail HTTP-COMPLETE for the user's setting, not its defect.
MIN_BODY_BYTES = 64 * 1024

FUZZ_INSTALL = "pip install 'completions-conformance[fuzz]'"


def _integer(option: str, value: object, least: int, why: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        return f"{option} {value!r}: expected an integer >= {least} ({why})"
    return None


def _seconds(option: str, value: object) -> str | None:
    # A zero or negative bound ends every exchange before its first byte and blames the
    # target; a NaN or infinite one is no bound at all (and crashes the HTTP client).
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        return f"{option} {value!r}: expected a finite number of seconds > 0"
    return None


def number_problems(setup: Setup) -> list[str]:
    """What is wrong with the numbers and header names of ``setup``, one line each."""
    s, limits = setup.settings, setup.limits
    found = [
        _integer(
            "--max-examples", s.max_examples, 1,
            "a generated test sends at least one request; leave scenarios out with -k or "
            "--skip-checks",
        ),
        # --max-tokens is the upper bound of the max_tokens the generated requests carry.
        # 0 would make every generated answer empty: stop, echo, logprobs and text checks
        # would judge nothing and pass. max_tokens: 0 itself is sent by its own edge case.
        _integer(
            "--max-tokens", s.max_tokens, 1,
            "the upper bound of generated max_tokens; an answer needs a token to be judged",
        ),
        _integer(
            "--vocab-size", s.vocab_size, 1,
            "token ids in token prompts are drawn below it",
        ),
        # The preflight request is one of the budget: 1 leaves none for the suite, a
        # legitimate (incomplete) run; 0 or less cannot even ask the preflight.
        _integer(
            "--budget-requests", s.budget_requests, 1,
            "the most requests in the run",
        ),
        _integer(
            "--budget-tokens", s.budget_tokens, 1,
            "the most tokens in the run",
        ),
        _integer(
            "--concurrency", s.concurrency, 1,
            "requests in flight at once; 1 sends one after another",
        ),
        _integer("--fuzz", s.fuzz, 0, "0 is off"),
        None if type(s.seed) is int else f"--seed {s.seed!r}: expected an integer",
        _seconds("--request-timeout", limits.ttfb),
        _seconds("--stream-gap", limits.gap),
        _seconds("--stream-total", limits.total),
        _integer(
            "--max-body-bytes", limits.max_bytes, MIN_BODY_BYTES,
            "a smaller bound would fail a conformant target's larger answers",
        ),
    ]  # fmt: skip
    if setup.rps is not None:
        rps = setup.rps
        if isinstance(rps, bool) or not isinstance(rps, int | float) or not rps > 0:
            found.append(f"--rps {rps!r}: expected requests per second > 0")
        elif not math.isfinite(rps):
            found.append(f"--rps {rps!r}: expected a finite number; omit it to send unpaced")
    for name, _value in setup.headers:
        if not name.strip() or any(c in name for c in ":\r\n "):
            found.append(f"--header {name!r}: expected 'Name: value'")
    return [f for f in found if f]


def fuzz_problem(fuzz: int) -> str | None:
    """``--fuzz N`` asks for schemathesis's generation: without it the run cannot be what was
    asked (a nightly "deep run" that never ran deep), so it does not start."""
    if fuzz <= 0:
        return None
    try:
        import schemathesis  # noqa: F401  (the fuzz scenario imports it anyway)
    except ImportError:
        return (
            f"--fuzz {fuzz} needs schemathesis, which is not installed: {FUZZ_INSTALL} "
            "(or drop --fuzz)"
        )
    return None


def unknown_names(option: str, given: Iterable[str], known: Sequence[str], what: str) -> str | None:
    """One line naming the unknown entries of ``given`` (with the nearest known name)."""
    unknown = [name for name in given if name not in known]
    if not unknown:
        return None
    guesses = []
    for name in unknown:
        near = difflib.get_close_matches(name, known, n=1)
        guesses.append(f"{name!r}" + (f" (did you mean {near[0]}?)" if near else ""))
    return f"{option}: unknown {what} {', '.join(guesses)}; known: {', '.join(sorted(known))}"


def problem(setup: Setup) -> str | None:
    """The first thing wrong with ``setup`` that needs no spec, or None."""
    s = setup.settings
    found = number_problems(setup)
    return (
        (found[0] if found else None)
        or fuzz_problem(s.fuzz)
        or requirement_problem(s.checks, s.skip_checks)
    )


def requirement_problem(checks: Iterable[str], skip_checks: Iterable[str]) -> str | None:
    """Unknown requirement IDs in ``--checks`` / ``--skip-checks``."""
    from conformance.judging.checks import load_checks
    from conformance.judging.requirements import REGISTRY

    load_checks()
    known = sorted(REGISTRY)
    return unknown_names("--checks", checks, known, "requirement ID") or unknown_names(
        "--skip-checks", skip_checks, known, "requirement ID"
    )


def capability_names(spec: Spec) -> list[str]:
    """Every name ``--require-capabilities`` accepts: each feature the suite probes (under
    ``spec``: one ``null:<field>`` per request field) and each family (``prompt`` covers
    ``prompt:tokens``...), whether or not the spec declares the feature: a feature it does
    not declare is then unmet by the run, not a misspelling."""
    from conformance.judging.verdict.capabilities import capability_probes, feature_of

    probes = capability_probes(spec, "model", 8, fit=lambda probe, _point: probe)
    features = {feature_of(probe) for probe in probes}
    features |= {"logprobs:max", "stop:max"}  # probed only where the spec bounds them
    return sorted(features | {f.split(":", 1)[0] for f in features})


def spec_problem(setup: Setup, spec: Spec) -> str | None:
    """Unknown names in ``--require-capabilities`` (``logprob`` for ``logprobs``), which
    would otherwise be found unmet only after the whole run."""
    required = list(setup.settings.require_capabilities)
    if not required:
        return None
    return unknown_names("--require-capabilities", required, capability_names(spec), "capability")
