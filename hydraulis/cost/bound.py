"""The lower bound of any plan of a batch (design §4), used to report plan quality.

    LB = Σ_i min_{k : S_k ≥ s_i} D_k·(a_k·s_i² + b_k·s_i) / N

A sequence ``i`` of length ``s_i`` occupies the ``D_k = cp·tp·pp`` devices of a scheme ``k``
that can hold it for at least its own work on every stage; spread perfectly over all ``N``
devices that is ``LB``. Fixed per-micro-batch costs, pipeline bubbles and the reduction only add
to a real plan, so ``LB ≤`` every plan's step time.

Worked example: one sequence of 4,096 tokens, schemes (1,1,2) with ``a = 1.37e-6, b = 0.0946``
(D = 2) and (1,2,1) with ``a = 2.05e-6, b = 0.0967`` (D = 2), N = 4:
``min(2·410.5, 2·430.6)/4 = 205.3`` ms.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hydraulis.errors import HydraulisError, require
from hydraulis.types import Scheme, TimeCoefficients


def lower_bound_ms(
    lengths: Sequence[int] | np.ndarray,
    schemes: Sequence[tuple[Scheme, TimeCoefficients, int]],
    devices: int,
) -> float:
    """``LB`` over candidate ``(scheme, coefficients, max_seq_len)`` triples and ``devices``."""
    require(devices > 0, "devices", devices, "must be > 0")
    s = np.asarray(lengths, dtype=np.float64)
    best = np.full(s.shape, np.inf)
    for scheme, time, capacity in schemes:
        work = scheme.devices * (time.a * s * s + time.b * s)
        best = np.where(s <= capacity, np.minimum(best, work), best)
    if s.size and not np.isfinite(best).all():
        index = int(np.flatnonzero(~np.isfinite(best))[0])
        longest = max((capacity for _, _, capacity in schemes), default=0)
        raise HydraulisError(f"lengths[{index}]", int(s[index]),
                             f"exceeds the longest sequence any scheme can hold ({longest})")
    return float(best.sum() / devices)
