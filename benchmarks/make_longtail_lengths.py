"""Write ``examples/data/longtail.txt``: 20,000 document lengths with a lognormal body and a
Pareto tail (a stand-in for ``hydraulis data synth`` until the data issue lands).

    s = round(LogNormal(μ = 6.5, σ = 1.1))             with probability 0.95  (median ≈ 665)
    s = round(4096 · (1 + Pareto(α = 1.5)))           with probability 0.05  (≥ 4,096 tokens)

With seed 0: median 718 tokens, mean ≈ 1.8K, 34 % of all tokens in documents above 8K and
22 % above 16K; under a 200K-token budget and a 32K maximum, most steps hold a 32K piece.

    python benchmarks/make_longtail_lengths.py [--docs 20000] [--seed 0] [-o examples/data/longtail.txt]
"""
from __future__ import annotations

import argparse

import numpy as np

from hydraulis.artifacts import write_lengths


def longtail_lengths(docs: int, seed: int, mu: float = 6.5, sigma: float = 1.1, tail_share: float = 0.05,
                     tail_start: int = 4096, tail_alpha: float = 1.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    body = rng.lognormal(mu, sigma, docs)
    tail = tail_start * (1.0 + rng.pareto(tail_alpha, docs))
    lengths = np.where(rng.random(docs) < tail_share, tail, body)
    return np.maximum(1, np.round(lengths)).astype(np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", default="examples/data/longtail.txt")
    args = parser.parse_args()
    lengths = longtail_lengths(args.docs, args.seed)
    write_lengths(args.output, lengths)
    print(f"wrote {args.output}: {lengths.size} lengths, median {np.median(lengths):.0f}, "
          f"mean {lengths.mean():.0f}, tokens above 8K {lengths[lengths > 8192].sum() / lengths.sum():.1%}")


if __name__ == "__main__":
    main()
