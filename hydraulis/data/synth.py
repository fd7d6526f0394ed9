"""Synthetic long-tailed document lengths: a lognormal body with a Pareto tail.

Each document independently comes from the tail with probability ``tail_share``, else from the
body:

* body: ``s = max(1, round(exp(μ + σ·z)))``, ``z ~ N(0, 1)`` — median ``e^μ``;
* tail: ``s = round(x_m · u^(−1/α))``, ``u ~ U(0, 1]`` — a Pareto law from ``x_m`` with index
  ``α`` (``P(s > x) = (x_m / x)^α``; mean ``α·x_m / (α − 1)`` for ``α > 1``);
* every length is capped at ``max_len``.

Defaults (our assumptions for web-like text, not measurements): body median ``e^6 ≈ 403``
tokens, ``σ = 1`` (body mean ``e^6.5 ≈ 665``); 1 % of documents in a tail from 8192 tokens
with ``α = 1.5`` (tail mean 24576). Worked example of what follows: about
``0.01·24576 / (0.99·665 + 0.01·24576) ≈ 27 %`` of all tokens lie in documents above 8K,
although only about 1 % of the documents do — ``hydraulis data synth`` prints the realised
figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import require
from hydraulis.base.limits import LENGTH, LENGTHS, LOG_LENGTH, LOG_SPREAD, SEED, SHARE, TAIL_INDEX


@dataclass(frozen=True)
class LongTail:
    """Parameters of the length distribution (see the module docstring)."""

    body_mu: float = 6.0
    body_sigma: float = 1.0
    tail_start: int = 8192
    tail_alpha: float = 1.5
    tail_share: float = 0.01
    max_len: int = 1 << 20

    def __post_init__(self) -> None:
        LOG_LENGTH.check(self.body_mu, "body_mu")
        LOG_SPREAD.check(self.body_sigma, "body_sigma")
        LENGTH.check(self.tail_start, "tail_start")
        TAIL_INDEX.check(self.tail_alpha, "tail_alpha")
        SHARE.check(self.tail_share, "tail_share")
        LENGTH.check(self.max_len, "max_len")
        require(self.max_len >= self.tail_start, "max_len", self.max_len,
                f"must be >= tail_start = {self.tail_start}")


def synth_lengths(documents: int, shape: LongTail = LongTail(), seed: int = 0) -> np.ndarray:
    """``documents`` lengths drawn from ``shape`` with the random seed ``seed``."""
    LENGTHS.check(documents, "docs")
    SEED.check(seed, "seed")
    rng = np.random.default_rng(seed)
    in_tail = rng.random(documents) < shape.tail_share
    body = np.exp(rng.normal(shape.body_mu, shape.body_sigma, documents))
    tail = shape.tail_start * (1.0 - rng.random(documents)) ** (-1.0 / shape.tail_alpha)
    lengths = np.where(in_tail, tail, body)
    return np.clip(np.rint(np.minimum(lengths, shape.max_len)), 1, shape.max_len).astype(np.int64)
