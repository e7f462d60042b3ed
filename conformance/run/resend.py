"""When a send goes again: rate limits waited out, and bounds met in a crowd sent again alone.

Every way the suite sends (its own client, the openai SDK in sdk.py) goes through
``paced``, so that --rps, the back-off gate, the concurrency limit and the retry policy
hold for all, and every retry is counted. Two kinds of answer are sent again:

* **a rate limit** (429, or 503 with ``Retry-After``): waited out as the target says
  (``Retry-After``, for every sender at once: the throttle's gate), or, when it does not
  say, the way the official openai SDK does (``_calculate_retry_timeout`` in
  openai-python): 0.5 s doubled per retry, at most 8 s, less a random 0-25 %. Within the
  ``RetryPolicy``'s retries and total wait; the adaptive limit halves meanwhile. A
  gateway that refuses every third request without saying for how long (LiteLLM's
  router) thus still gets its answers.
* **a bound that load can cause**, met while other requests were in flight: a time-out
  (first byte, gap between reads, total time) or a connection cut. The time may have gone
  to the target's queue, not to this request (FastChat spent 28 s on an ``n: 129`` it
  accepted while seven healthy streams waited behind it). It is sent once more alone
  (the first started first); it is a finding only if it meets a bound alone too.
  Answered alone, the note names the request that held the target
  (conformance/run/flights.py), and that request is judged on its own answer like any
  other. Alone on the wire is not alone at the target while it still works on requests
  the client left: FastChat kept generating the 129 choices of an ``n: 129`` after the
  client gave up, llama-cpp-python the thousands of tokens of an unlimited
  ``max_tokens: 0``, minutes after the client gave up on it. How long that work lasts
  cannot be told from outside, only measured: before the send alone, the minimal request
  (the preflight's, ``Throttle.probe``) is sent alone until it is answered, within
  ``RetryPolicy.free_wait``, so the send alone meets a target shown free. A target that
  answers no minimal request within that wait stopped serving (llama-cpp-python spent
  many minutes on one streamed ``max_tokens: 0`` with a stop sequence, answering nobody):
  the engine's health (conformance/run/health.py) reports it as TARGET-ALIVE, naming the
  requests in flight, and nothing more is sent or judged. Once two requests of one kind (the
  same mode, streamed or not, a JSON body or not) met their bound again alone, on a
  target shown free, and none was answered, that kind is the target's (Prism never
  answers a body that is not JSON): later ones of that kind stand without being sent
  again; other kinds still are. A byte or event bound is the answer's own size: the
  same alone, never sent again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.flights import Flight, holder
from conformance.run.throttle import REPEATS_TO_STAND, Free, Throttle, request_kind

# Statuses a careful client waits out when the target says how long to wait.
RETRYABLE = (429, 503)
#: The bounds a crowd can make a request meet: the time bounds. Not the byte and event
#: bounds (the answer's own size, the same alone), nor the memory shared by the answers
#: held (it counts answers the engine still holds, so sent alone it would be held as
#: much; only answers of hostile size meet it).
LOAD_BOUNDS = ("ttfb", "gap", "total")
#: A connection cut (a reset, an end of stream, a refused connection), as a kind of bound.
CUT = "cut"
#: The back-off's jitter has a generator of its own: drawing from the global one while
#: Hypothesis generates cases on another thread would change its state under it.
_JITTER = random.Random()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a rate-limited or busy target is waited for before the run gives up."""

    max_retries: int = 3
    max_wait: float = 30.0
    #: How long a send about to go alone waits for the target to answer the minimal
    #: request (the work the client left done): llama-cpp-python, one slot, spent about
    #: 75 s on each unlimited ``max_tokens: 0`` answer, 45 s of it after the client left.
    free_wait: float = 240.0
    #: When the target does not say how long to wait: the openai SDK's back-off
    #: (INITIAL_RETRY_DELAY, MAX_RETRY_DELAY in openai/_constants.py).
    initial_backoff: float = 0.5
    max_backoff: float = 8.0


def backoff(policy: RetryPolicy, retries: int, rand: Callable[[], float] = _JITTER.random) -> float:
    """Seconds to wait before retry ``retries + 1`` when the target did not say: the openai
    SDK's exponential back-off, reduced by a random 0-25 % (its jitter)."""
    seconds = min(policy.initial_backoff * 2.0 ** min(retries, 1000), policy.max_backoff)
    return seconds * (1 - 0.25 * rand())


def retry_after(exchange: Exchange) -> float | None:
    """Seconds to wait before retrying, when the target asked for a retry; else None.

    ``Retry-After`` is delay-seconds or an HTTP-date (RFC 9110 section 10.2.3).
    """
    if exchange.status not in RETRYABLE:
        return None
    value = exchange.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def load_cut(exchange: Exchange) -> str | None:
    """The bound a crowd could have made this answer meet (LOAD_BOUNDS, or CUT), or None."""
    if exchange.bound in LOAD_BOUNDS:
        return exchange.bound
    if exchange.bound is None and exchange.transport_error is not None:
        return CUT
    return None


def _what(exchange: Exchange) -> str:
    return exchange.transport_error or exchange.stream_error or f"bound hit: {exchange.bound}"


def paced(
    throttle: Throttle,
    policy: RetryPolicy,
    attempt: Callable[[], Exchange],
    case: Case | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Exchange:
    """Make ``attempt`` under the throttle: a rate limit waited out or backed off as the
    policy allows, a bound met in a crowd sent again alone (see the module's docstring).
    ``case`` is what ``attempt`` sends (its Flight names it)."""
    waited = 0.0
    retries = 0  # every send after the first: the budget counts them all
    limited_retries = 0  # rate limits waited out: the back-off's exponent
    throttled: list[Exchange] = []  # the 429 answers waited out
    crowd: tuple[Exchange, Flight, str] | None = None  # what it met beside others
    free: Free | None = None  # what the wait for a free target showed, before the send alone
    while True:
        flight = throttle.acquire(
            case,
            alone=crowd is not None,
            crowded=crowd[1] if crowd is not None else None,
            retry=limited_retries > 0,
        )
        if crowd is not None and free is None:
            if not throttle.resend_alone(crowd[2], case):
                # While it waited for its turn alone, the target showed it does not answer
                # this kind of request alone either (or stopped serving): its bound stands.
                throttle.cancel(flight)
                return _stands(crowd[0], crowd[2], throttle)
            free = throttle.wait_free(flight, policy.free_wait)
            if not free.answered:
                # It stopped serving (TARGET-ALIVE, conformance/run/health.py): the bound
                # met in the crowd is not this request's; nothing more is sent.
                throttle.cancel(flight)
                return _stands(crowd[0], crowd[2], throttle)
        exchange: Exchange | None = None
        limited = again = False
        kind: str | None = None
        try:
            exchange = attempt()
            exchange.retries = retries
            delay = retry_after(exchange)
            limited = exchange.status == 429 or delay is not None
            kind = None if crowd is not None else load_cut(exchange)
            again = kind is not None and flight.crowded and throttle.resend_alone(kind, case)
        finally:
            throttle.release(flight, exchange, rate_limited=limited, again_alone=again)
        if again:
            assert kind is not None
            crowd = (exchange, flight, kind)
            retries += 1
            continue
        if kind is not None and flight.crowded:
            _stands(exchange, kind, throttle)
        wait = _rate_limit_wait(exchange, delay, limited_retries, waited, policy)
        if wait is None:
            exchange.throttled = throttled
            if crowd is not None:
                assert free is not None
                _judged_alone(throttle, exchange, *crowd, free=free)
            return exchange
        if exchange.status == 429:
            throttled.append(exchange)  # waited out, and still judged (checks.ratelimit)
        retries += 1
        limited_retries += 1
        waited += wait
        if delay is not None:
            # Closes the gate for every sender; the next acquire() waits it out.
            throttle.back_off(wait)
        else:
            throttle.back_off(wait, shared=False)
            sleep(wait)


def _stands(exchange: Exchange, kind: str, throttle: Throttle) -> Exchange:
    if throttle.stopped is not None:
        why = (
            f"the target answered no minimal request within {throttle.stopped.wait:.0f} s: "
            "it stopped serving"
        )
    else:
        why = (
            f"{REPEATS_TO_STAND} requests of its kind ({request_kind(exchange.case)}) met "
            f"such a bound ({kind}) alone too, on a target shown free, and none was answered"
        )
    exchange.notes.append(
        f"{_what(exchange)} while other requests were in flight; not sent again alone: {why}"
    )
    return exchange


def _rate_limit_wait(
    exchange: Exchange, delay: float | None, retries: int, waited: float, policy: RetryPolicy
) -> float | None:
    """How long to wait before sending again after a rate limit; None: do not."""
    if delay is None and exchange.status != 429:
        return None
    wait = delay if delay is not None else backoff(policy, retries)
    if retries >= policy.max_retries or waited + wait > policy.max_wait:
        return None
    return wait


def _judged_alone(
    throttle: Throttle, exchange: Exchange, crowded: Exchange, flight: Flight, kind: str, *,
    free: Free,
) -> None:  # fmt: skip
    """Note what sending alone showed: answered (not a finding; who held the target), or
    the bound met again (the finding stands). ``free``: how the target was shown free
    before the send alone."""
    others = len(flight.overlapped)
    first = f"{_what(crowded)} while {others} other request(s) were in flight"
    sent = f"sent again alone{free.describe()}"
    # Alone, any bound (its own size too) or cut: the crowd was not the cause.
    again = load_cut(exchange) or exchange.bound
    throttle.judged_alone(kind, exchange.case, answered=again is None)
    if again is not None:
        exchange.notes.append(
            f"{first}; {sent}, it met a bound again ({again}): the finding stands"
        )
        return
    account = f"{first}; {sent}, answered in {exchange.elapsed:.1f} s: not a finding"
    held = holder(flight, time.monotonic())
    if held is not None:
        exchange.held_by = held.describe()
        account += (
            f"; the target was held by {exchange.held_by}, in flight "
            f"{held.duration(time.monotonic()):.1f} s through the whole wait"
        )
    exchange.notes.append(account)
    exchange.sent_alone = account
