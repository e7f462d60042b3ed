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
  (first byte, gap between reads, total time) or a connection cut. The time may have gone to the target's queue, not to this request (FastChat spent
  28 s on an ``n: 129`` it accepted while seven healthy streams waited behind it). It is
  sent once more alone (the first started first); it is a finding only if it meets a
  bound alone too. Answered alone, the note names the request that held the target
  (conformance/run/flights.py), and that request is judged on its own answer like any other.
  Alone on the wire is not alone at the target when it still works on a request the
  client left (FastChat kept generating the 129 choices of an ``n: 129`` whose time-out
  stood alone, and a healthy stream sent alone next waited behind them): met alone less
  than that request's own wait after it was left, the bound sends it once more alone,
  once that work may be done (``Flight.free_by``), until two such sends met their bound
  again and none was answered (``BEHIND``). A byte or event bound is the answer's
  own size: the same alone, never sent again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from conformance.judging.case import Case
from conformance.judging.exchange import Exchange
from conformance.run.flights import Flight, holder
from conformance.run.throttle import REPEATS_TO_STAND, Throttle

# Statuses a careful client waits out when the target says how long to wait.
RETRYABLE = (429, 503)
#: The bounds a crowd can make a request meet: the time bounds. Not the byte and event
#: bounds (the answer's own size, the same alone), nor the memory shared by the answers
#: held (it counts answers the engine still holds, so sent alone it would be held as
#: much; only answers of hostile size meet it).
LOAD_BOUNDS = ("ttfb", "gap", "total")
#: A connection cut (a reset, an end of stream, a refused connection), as a kind of bound.
CUT = "cut"
#: Sends alone once more after work a client left (``Throttle.wait_behind``), as a kind of
#: bound: once two met their bound again and none was answered, that work outlasts the
#: wait (llama-cpp-python's unlimited ``max_tokens: 0`` answers), and no more are sent.
BEHIND = "behind"
#: The back-off's jitter has a generator of its own: drawing from the global one while
#: Hypothesis generates cases on another thread would change its state under it.
_JITTER = random.Random()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a rate-limited target is waited for before the run gives up."""

    max_retries: int = 3
    max_wait: float = 30.0
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
    behind: Flight | None = None  # work the target may have kept doing for a client that left
    while True:
        flight = throttle.acquire(
            case, alone=crowd is not None, crowded=crowd[1] if crowd is not None else None
        )
        if crowd is not None and retries == 1 and not throttle.resend_alone(crowd[2]):
            # While it waited for its turn alone, others met their bound again alone: the
            # target is silent, not busy. This one's bound stands, without another wait.
            throttle.cancel(flight)
            return _stands(crowd[0], crowd[2])
        exchange: Exchange | None = None
        limited = again = False
        kind: str | None = None
        try:
            exchange = attempt()
            exchange.retries = retries
            delay = retry_after(exchange)
            limited = exchange.status == 429 or delay is not None
            kind = None if crowd is not None else load_cut(exchange)
            again = kind is not None and flight.crowded and throttle.resend_alone(kind)
        finally:
            throttle.release(flight, exchange, rate_limited=limited, again_alone=again)
        if again:
            assert kind is not None
            crowd = (exchange, flight, kind)
            retries += 1
            continue
        if kind is not None and flight.crowded:
            _stands(exchange, kind)
        if crowd is not None and behind is None and load_cut(exchange) is not None:
            # Alone on the wire, not at the target, when it still works on a request the
            # client left: once that work may be done, it goes alone once more.
            behind = throttle.left_working(flight) if throttle.resend_alone(BEHIND) else None
            if behind is not None:
                throttle.wait_behind(crowd[1], behind.free_by)
                retries += 1
                continue
        wait = _rate_limit_wait(exchange, delay, limited_retries, waited, policy)
        if wait is None:
            exchange.throttled = throttled
            if crowd is not None:
                _judged_alone(throttle, exchange, *crowd, alone=flight, behind=behind)
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


def _stands(exchange: Exchange, kind: str) -> Exchange:
    exchange.notes.append(
        f"{_what(exchange)} while other requests were in flight; not sent again alone: "
        f"{REPEATS_TO_STAND} requests met such a bound ({kind}) alone too, and none was "
        "answered alone"
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
    throttle: Throttle,
    exchange: Exchange,
    crowded: Exchange,
    flight: Flight,
    kind: str,
    *,
    alone: Flight,
    behind: Flight | None,
) -> None:
    """Note what sending alone showed: answered (not a finding; who held the target), or
    the bound met again (the finding stands). ``behind``: the first send alone waited
    behind work the target kept doing for a client that left, and this is the next one."""
    others = len(flight.overlapped)
    first = f"{_what(crowded)} while {others} other request(s) were in flight"
    sent = "sent again alone"
    if behind is not None:
        first += (
            f"; sent again alone, it met a bound again behind {behind.describe()}, which met "
            "its bound alone too and which the target may still have been working on"
        )
        sent = "sent alone once more when that work may have been done"
    # Alone, any bound (its own size too) or cut: the crowd was not the cause.
    again = load_cut(exchange) or exchange.bound
    throttle.judged_alone(kind, answered=again is None)
    if behind is not None:
        throttle.judged_alone(BEHIND, answered=again is None, counted=False)
    if again is not None:
        alone.stood_alone = True
        exchange.notes.append(
            f"{first}; {sent}, it met a bound again ({again}): the finding stands"
        )
        return
    account = f"{first}; {sent}, answered in {exchange.elapsed:.1f} s: not a finding"
    held = behind or holder(flight, time.monotonic())
    if held is not None:
        exchange.held_by = held.describe()
        account += f"; the target was held by {exchange.held_by}"
        if behind is None:
            account += f", in flight {held.duration(time.monotonic()):.1f} s through the whole wait"
    exchange.notes.append(account)
    exchange.sent_alone = account
