"""Write ``examples/data/longtail_lengths.txt.gz``: 20,000 synthetic document lengths, long-tailed.

A lognormal body (median 600 tokens, σ = 1.0) holds 96 % of the documents; a Pareto tail
(x_m = 3,000, α = 1.4) the other 4 %, so about 0.14 % of documents exceed 32K tokens
(``0.04·(3000/32768)^1.4``). Steps of 128K tokens then hold ~100 documents and their longest
sequence spreads over the whole range (median ≈ 15K, a quarter ≈ 30K or more). The seed is
fixed, so the file is the same on every machine; it is committed and used by the demo, the
planner's tests and benchmarks. Run from the repository root:

    .venv/bin/python examples/make_longtail_lengths.py
"""

from pathlib import Path

import numpy as np

from hydraulis.artifacts import write_lengths

DOCUMENTS = 20_000
TAIL_SHARE = 0.04
BODY_MEDIAN, BODY_SIGMA = 600.0, 1.0
TAIL_SCALE, TAIL_ALPHA = 3000.0, 1.4
LONGEST = 1_000_000
SEED = 20240607


def longtail_lengths(documents: int = DOCUMENTS, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    body = rng.lognormal(np.log(BODY_MEDIAN), BODY_SIGMA, size=documents)
    tail = TAIL_SCALE * (1.0 + rng.pareto(TAIL_ALPHA, size=documents))
    lengths = np.where(rng.random(documents) < TAIL_SHARE, tail, body)
    return np.clip(np.rint(lengths), 1, LONGEST).astype(np.int64)


if __name__ == "__main__":
    target = Path(__file__).resolve().parent / "data" / "longtail_lengths.txt.gz"
    write_lengths(target, longtail_lengths())
    print(f"wrote {target}")
