"""Time of packed micro-batches on one pipeline stage (design §6).

    t_k(mb) = c_k + Σ_{i ∈ mb} (a_k·s_i² + b_k·s_i)

The quadratic term is attention (causal, per document, since packed documents never attend to
each other), the linear term the dense layers, ``c_k`` a fixed per-micro-batch overhead.

Worked example, the reference LLaMA-7B pool's scheme (1,2,2) (``a = 1.0266e-6``,
``b = 0.04907``, ``c = 31.87``): a micro-batch packing 8,192 + 2 × 1,024 tokens takes
``31.87 + 1.0266e-6·(8192² + 2·1024²) + 0.04907·10240 ≈ 31.87 + 71.05 + 502.5 ≈ 605.4`` ms per stage.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hydraulis.types import TimeCoefficients


def sequence_time_ms(time: TimeCoefficients, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """Per-sequence work ``a·s² + b·s`` (no fixed term), element-wise."""
    s = np.asarray(lengths, dtype=np.float64)
    return time.a * s * s + time.b * s


def microbatch_time_ms(time: TimeCoefficients, lengths: Sequence[int] | np.ndarray) -> float:
    """``c + Σ (a·s² + b·s)`` for one micro-batch holding sequences of ``lengths``."""
    return float(time.c + sequence_time_ms(time, lengths).sum())
