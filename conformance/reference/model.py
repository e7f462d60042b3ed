"""The reference target's fake language model: vocabulary, tokenizer and sampler.

Nothing here touches the network or the clock. Generation is a pure function of its
arguments; the only randomness comes from the ``random.Random`` the caller passes in
(``sampler_rng`` builds it), so a seeded or greedy request is reproducible.

The model is a toy bigram-ish sampler with honest probabilities:

- The vocabulary has exactly ``VOCAB_SIZE`` tokens. Token 0 is the end-of-text token
  and is never emitted as text; every other token is a short word with a leading space,
  so generated text re-tokenizes to exactly the tokens that produced it.
- At each step the 999 ordinary tokens are ranked by a permutation derived from a hash
  of (prompt, step, previous token), and rank ``r`` has probability proportional to
  ``1 / r**1.2`` (scaled by ``1 - EOS_PROBABILITY``). Reported logprobs are the logs of
  these model probabilities, so they are always <= 0 and top-k lists are truly the top k.
- Before each token after the first ``MIN_NATURAL_TOKENS`` an end-of-text draw ends the
  completion naturally with probability ``EOS_PROBABILITY``. Greedy decoding (temperature 0) takes rank 1 and makes that draw
  from the hash, so its output depends on the prompt alone.
- Every step depends only on what came before it, so a completion is a prefix of any
  longer completion of the same request: ``max_tokens`` and ``stop`` only truncate.
  That is what makes stop probes meaningful (a word picked from a first answer is hit
  at the same place the second time) and streamed text equal to non-streamed text.
- A prompt holding a non-ASCII character is answered in kind: every generated word is
  spelled with accents (``e`` as ``é``, ``o`` as ``ö``), so some answers carry multi-byte
  UTF-8 text for a stream to get wrong. The tokens are the same; only their spelling
  changes.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

__all__ = [
    "ACCENTED",
    "DEFAULT_PROMPT",
    "EOS_ID",
    "EOS_PROBABILITY",
    "EOS_TEXT",
    "MIN_NATURAL_TOKENS",
    "VOCAB",
    "VOCAB_SIZE",
    "Completion",
    "Prompt",
    "Token",
    "decode",
    "generate",
    "sampler_rng",
    "score_prompt",
    "spelling",
    "tokenize",
]

VOCAB_SIZE = 1000
EOS_ID = 0
EOS_TEXT = "<|endoftext|>"
#: What a null prompt means (the AIHubMix spec declares this default).
DEFAULT_PROMPT = EOS_TEXT
#: Probability, per generated token, that the completion ends naturally.
EOS_PROBABILITY = 0.1
#: Tokens generated before a natural end becomes possible, so that every answer has a
#: few words to pick a stop sequence from.
MIN_NATURAL_TOKENS = 3

_ORDINARY = VOCAB_SIZE - 1  # tokens 1..999, the ones that can be generated
_ZIPF_EXPONENT = 1.2
# Words that never appear in the vocabulary's generated part, listed first so that
# outputs read like the examples in the documentation.
_SEED_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
    "bravo",
    "charlie",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]
_PIECE = re.compile(r"\s*\S+|\s+")


def _build_vocabulary() -> tuple[str, ...]:
    """Build the fixed vocabulary: end-of-text, then 999 distinct space-led words."""
    words: list[str] = []
    seen: set[str] = set()
    consonants = "bdfgklmnprstvz"
    vowels = "aeiou"
    syllables = [c + v for c in consonants for v in vowels]
    generated = ("".join(pair) for pair in itertools.product(syllables, repeat=2))
    for word in itertools.chain(_SEED_WORDS, generated):
        if word not in seen:
            seen.add(word)
            words.append(" " + word)
        if len(words) == _ORDINARY:
            break
    return (EOS_TEXT, *words)


VOCAB: tuple[str, ...] = _build_vocabulary()
_VOCAB_INDEX = {text: i for i, text in enumerate(VOCAB)}
assert len(VOCAB) == VOCAB_SIZE and len(_VOCAB_INDEX) == VOCAB_SIZE
#: The vocabulary as a prompt with non-ASCII text is answered: two-byte UTF-8 letters.
_ACCENTS = str.maketrans({"e": "é", "o": "ö"})
ACCENTED: tuple[str, ...] = (EOS_TEXT, *(word.translate(_ACCENTS) for word in VOCAB[1:]))

# Rank r (1-based) of the ordinary tokens has model probability _PROB[r].
_WEIGHTS = [0.0] + [1.0 / r**_ZIPF_EXPONENT for r in range(1, _ORDINARY + 1)]
_TOTAL = sum(_WEIGHTS)
_PROB = [(1.0 - EOS_PROBABILITY) * w / _TOTAL for w in _WEIGHTS]
_LOGP = [0.0] + [math.log(p) for p in _PROB[1:]]
# A prompt piece outside the vocabulary is less likely than any ranked token.
_UNKNOWN_LOGP = _LOGP[-1] - 2.0
# Multipliers that make ``a * x + b (mod 999)`` a permutation of the ranks.
_UNITS = tuple(a for a in range(1, _ORDINARY) if math.gcd(a, _ORDINARY) == 1)


def tokenize(text: str) -> list[str]:
    """Split text into tokens: each piece matches ``\\s*\\S+`` or a trailing ``\\s+``.

    Joining the pieces gives the text back exactly, so the token count of a string
    prompt is ``len(tokenize(text))``.
    """
    return _PIECE.findall(text)


def decode(ids: Sequence[int]) -> str:
    """Turn token ids (each in ``[0, VOCAB_SIZE)``) back into text."""
    return "".join(VOCAB[i] for i in ids)


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: its text and the tokens it counts as."""

    text: str
    tokens: tuple[str, ...]

    @classmethod
    def from_text(cls, text: str) -> Prompt:
        """A string prompt, tokenized with ``tokenize``."""
        return cls(text, tuple(tokenize(text)))

    @classmethod
    def from_ids(cls, ids: Sequence[int]) -> Prompt:
        """A token-id prompt; each id counts as one token even if its text would merge."""
        pieces = tuple(VOCAB[i] for i in ids)
        return cls("".join(pieces), pieces)


@dataclass(frozen=True, slots=True)
class Token:
    """One token of returned text with its logprob and, when asked for, its top-k map.

    ``logprob`` and ``top_logprobs`` are None for the first token of an echoed prompt,
    which has no context to be predicted from (as on OpenAI).
    """

    text: str
    logprob: float | None
    top_logprobs: dict[str, float] | None = None

    def truncated(self, length: int) -> Token:
        """This token cut to its first ``length`` characters (a stop sequence began inside it)."""
        text = self.text[:length]
        top = self.top_logprobs
        if top is not None and self.logprob is not None:
            # Keep the chosen token in its own top-k map, under its new spelling.
            top = {k: v for k, v in top.items() if k != self.text}
            top[text] = self.logprob
        return replace(self, text=text, top_logprobs=top)


@dataclass(frozen=True, slots=True)
class Completion:
    """The generated part of one choice and why generation ended."""

    tokens: tuple[Token, ...]
    finish_reason: str  # "stop" or "length"

    @property
    def text(self) -> str:
        return "".join(t.text for t in self.tokens)

    @property
    def mean_logprob(self) -> float:
        """Mean logprob per token, the score ``best_of`` ranks candidates by.

        An empty completion scores the end-of-text logprob, as if that token were its
        only one.
        """
        values = [t.logprob for t in self.tokens if t.logprob is not None]
        if not values:
            return math.log(EOS_PROBABILITY)
        return sum(values) / len(values)


def _hash(*parts: object) -> bytes:
    """A stable 16-byte digest of the parts (Python's ``hash`` is salted per process)."""
    data = "\x1f".join(repr(p) for p in parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).digest()


def _step_state(key: bytes, step: int, prev: int) -> tuple[int, int, float]:
    """The ranking permutation ``(a, b)`` and a uniform draw for one step."""
    digest = hashlib.blake2b(
        key + step.to_bytes(8, "big") + prev.to_bytes(2, "big"), digest_size=16
    ).digest()
    a = _UNITS[int.from_bytes(digest[:4], "big") % len(_UNITS)]
    b = int.from_bytes(digest[4:8], "big") % _ORDINARY
    u = int.from_bytes(digest[8:], "big") / 2.0**64
    return a, b, u


def _token_at(a: int, b: int, rank: int) -> int:
    """The token id that has ``rank`` (1-based) under permutation ``(a, b)``."""
    return 1 + (a * (rank - 1) + b) % _ORDINARY


def _rank_of(a: int, b: int, token_id: int) -> int:
    """The rank of an ordinary token id under permutation ``(a, b)``."""
    return 1 + (pow(a, -1, _ORDINARY) * (token_id - 1 - b)) % _ORDINARY


def _top(a: int, b: int, k: int, words: Sequence[str] = VOCAB) -> dict[str, float]:
    """The ``k`` most likely tokens of a step, with their logprobs, spelled from ``words``."""
    return {words[_token_at(a, b, r)]: _LOGP[r] for r in range(1, min(k, _ORDINARY) + 1)}


@functools.lru_cache(maxsize=128)
def _cumulative(temperature: float, top_p: float) -> tuple[float, ...]:
    """Cumulative sampling weights of the ranks kept at this temperature and top_p."""
    # Weights relative to rank 1 so that tiny temperatures underflow to "rank 1 only"
    # instead of to all zeros.
    weights = [(_WEIGHTS[r] / _WEIGHTS[1]) ** (1.0 / temperature) for r in range(1, _ORDINARY + 1)]
    cumulative = list(itertools.accumulate(weights))
    total = cumulative[-1]
    # Nucleus sampling: the smallest prefix of ranks whose mass reaches top_p.
    keep = bisect.bisect_left(cumulative, top_p * total) + 1
    return tuple(cumulative[: max(1, min(keep, _ORDINARY))])


def _sample_rank(rng: random.Random, cumulative: tuple[float, ...]) -> int:
    """Draw a rank (1-based) from cumulative weights."""
    return bisect.bisect_right(cumulative, rng.random() * cumulative[-1]) + 1


def sampler_rng(
    prompt: Prompt, *, index: int, seed: int | None, temperature: float, top_p: float
) -> random.Random | None:
    """The randomness for one choice: None means greedy decoding.

    Temperature 0 is greedy (output depends on the prompt only). With a seed, the draws
    depend on seed, prompt, choice index and sampling settings; without one they are
    fresh entropy, as on a real provider.
    """
    if temperature == 0:
        return None
    if seed is not None:
        return random.Random(_hash("seed", seed, prompt.text, index, temperature, top_p))
    return random.Random()


def spelling(prompt: Prompt) -> tuple[str, ...]:
    """How the answer to ``prompt`` spells the vocabulary: accented for non-ASCII prompts."""
    return ACCENTED if any(ord(ch) > 127 for ch in prompt.text) else VOCAB


def _model_key(prompt: Prompt, variant: str) -> bytes:
    return _hash("model", variant, prompt.text)


def _last_id(prompt: Prompt) -> int:
    return _VOCAB_INDEX.get(prompt.tokens[-1], EOS_ID) if prompt.tokens else EOS_ID


def _find_stop(text: str, start: int, stop: Sequence[str]) -> tuple[int, int] | None:
    """The earliest stop occurrence at or after ``start`` as ``(position, length)``."""
    best: tuple[int, int] | None = None
    for s in stop:
        pos = text.find(s, start)
        if pos >= 0 and (best is None or pos < best[0] or (pos == best[0] and len(s) > best[1])):
            best = (pos, len(s))
    return best


def _cut(tokens: list[Token], length: int) -> list[Token]:
    """Keep the first ``length`` characters of the tokens, splitting the last if needed."""
    out: list[Token] = []
    used = 0
    for token in tokens:
        if used + len(token.text) <= length:
            out.append(token)
            used += len(token.text)
            continue
        if length > used:
            out.append(token.truncated(length - used))
        break
    return out


def generate(
    prompt: Prompt,
    *,
    max_tokens: int,
    rng: random.Random | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop: Sequence[str] = (),
    top_k: int | None = None,
    include_stop: bool = False,
    natural_stop: bool = True,
    variant: str = "",
    stop_in_one_token: bool = False,
    stop_finish: str = "stop",
    eos_after: int | None = None,
    stop_head_kept: bool = False,
) -> Completion:
    """Generate one completion of ``prompt``.

    ``rng`` None means greedy decoding. ``top_k`` asks for top-k maps (None: no maps).
    A stop string ends generation and is cut out of the text (``include_stop`` keeps
    it, ``natural_stop=False`` disables end-of-text draws, ``stop_in_one_token`` matches
    a stop only inside one token and ``stop_finish`` is the finish_reason of a stop
    sequence's end: they exist only so the fault switch can break these rules; ``eos_after``
    ends every completion naturally after that many tokens, a tiny model's legal habit;
    ``stop_head_kept`` cuts a stop sequence by dropping only the token that completed it,
    so the head of one that spans tokens stays in the text).
    ``variant`` perturbs the model itself.
    """
    stops = tuple(s for s in stop if s)
    longest_stop = max((len(s) for s in stops), default=0)
    cumulative = _cumulative(temperature, top_p) if rng is not None else ()
    key = _model_key(prompt, variant)
    words = spelling(prompt)
    prev = _last_id(prompt)
    tokens: list[Token] = []
    text = ""
    for step in range(max_tokens):
        a, b, u = _step_state(key, step, prev)
        if eos_after is not None and step >= eos_after:
            return Completion(tuple(tokens), "stop")
        eos_possible = natural_stop and step >= MIN_NATURAL_TOKENS
        if eos_possible and (u if rng is None else rng.random()) < EOS_PROBABILITY:
            return Completion(tuple(tokens), "stop")
        rank = 1 if rng is None else _sample_rank(rng, cumulative)
        token_id = _token_at(a, b, rank)
        top = None
        if top_k is not None:
            top = _top(a, b, top_k, words)
            top[words[token_id]] = _LOGP[rank]
        tokens.append(Token(words[token_id], _LOGP[rank], top))
        prev = token_id
        before = len(text)
        text += words[token_id]
        if stops:
            # Earlier checks found nothing, so a new occurrence must end in this token.
            start = before if stop_in_one_token else max(0, before - longest_stop + 1)
            hit = _find_stop(text, start, stops)
            if hit is not None:
                end = hit[0] + hit[1] if include_stop else hit[0]
                if stop_head_kept:
                    end = max(end, before)
                return Completion(tuple(_cut(tokens, end)), stop_finish)
    return Completion(tuple(tokens), "length")


def score_prompt(prompt: Prompt, *, top_k: int | None = None) -> tuple[Token, ...]:
    """The prompt's tokens with the logprobs the model gives them (for ``echo``).

    The first token has no logprob; pieces outside the vocabulary get a logprob below
    every ranked token.
    """
    key = _hash("score", prompt.text)
    out: list[Token] = []
    prev = EOS_ID
    for i, piece in enumerate(prompt.tokens):
        token_id = _VOCAB_INDEX.get(piece)
        if i == 0:
            out.append(Token(piece, None, None))
        else:
            a, b, _ = _step_state(key, i, prev)
            logprob = _UNKNOWN_LOGP
            if token_id is not None and token_id != EOS_ID:
                logprob = _LOGP[_rank_of(a, b, token_id)]
            top = None
            if top_k is not None:
                top = _top(a, b, top_k)
                top[piece] = logprob
            out.append(Token(piece, logprob, top))
        prev = token_id if token_id is not None else EOS_ID
    return tuple(out)
