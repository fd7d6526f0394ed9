"""Stage 1's estimate of a pipeline's time before its sequences are packed.

A pipeline with ``p`` stages holding pieces of total per-stage work ``W = Σ_i w(s_i)`` and
``n`` tokens, packed into ``v`` micro-batches, runs under 1F1B in about

    T(v) = W + v·c + (p − 1)·(c + max(κ·W/v, w_max) + 2d)

``W + v·c`` is the work of every stage; the rest is the pipeline's fill and drain: with equal
micro-batches of ``W/v`` each it is exactly ``(p − 1)·(c + W/v)`` (κ = 1, the closed form of
:mod:`hydraulis.cost.pipeline`); stage 2's ramped micro-batches (small at both ends, large in
the middle) cut it to κ ≈ 0.75 (measured on the exact simulation: 0.70–0.79 for ``p`` = 2–8).
A piece of work ``w_max`` cannot be split, and the simulation shows a dominant micro-batch
costs ``(p − 1)·t_max`` on top of the work (its forward and backward cross every stage while
the others wait). ``d`` is the point-to-point latency per hand-off.

The best ``v`` balances ``v·c`` against ``(p − 1)·κ·W/v``: ``v* = √(κ·(p − 1)·W/c)``, but at
least ``⌈n/C⌉`` (micro-batches hold at most ``C`` tokens) and at most the number of pieces.
For ``p = 1`` the estimate is exact: ``T = W + ⌈n/C⌉·c`` (when the pieces bin-pack tightly).

Worked example: ``p = 2``, ``c = 15``, ``W = 600``, κ = 0.75, ``C`` large, many small pieces:
``v* = √(0.75·600/15) ≈ 5.5``; ``T ≈ 600 + 82 + 15 + 82 = 779`` ms (the exact simulation of
the best ramp found 779.5 ms).
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True)
def estimate_ms(work: float, tokens: int, longest: float, pieces: int,
                c: float, pp: int, capacity: int, kappa: float, p2p_ms: float) -> tuple[float, float]:
    """``(T(v), v)`` of the module docstring at the best ``v``: ``v* = √(κ·(p − 1)·W/c)``
    within ``[fewest, max(pieces, fewest)]`` (the most when ``c = 0``), ``fewest = ⌈n/C⌉``
    (``(0, 0)`` for an empty pipeline; ``v = fewest`` for one stage). Compiled (numba): stage 1
    calls it for every piece and class it weighs, from compiled code; IEEE arithmetic in the
    order written, so the same floats as the interpreter's."""
    if pieces == 0:
        return 0.0, 0.0
    fewest = -(-tokens // capacity)
    if fewest < 1:
        fewest = 1
    if pp == 1:
        return work + fewest * c, float(fewest)
    most = pieces if pieces > fewest else fewest
    v = math.sqrt(kappa * (pp - 1) * work / c) if c > 0 else float(most)
    if v < fewest:
        v = float(fewest)
    if v > most:
        v = float(most)
    spread = kappa * work / v
    return work + v * c + (pp - 1) * (c + (spread if spread >= longest else longest) + 2.0 * p2p_ms), v


def estimate_many(work: np.ndarray, tokens: np.ndarray, longest: np.ndarray, pieces: np.ndarray,
                  c: float, pp: int, capacity: int, kappa: float, p2p_ms: float) -> np.ndarray:
    """:func:`estimate_ms`'s ``T(v)`` for many pipelines of one class at once (element-wise
    over ``work``, ``tokens``, ``longest`` and ``pieces``; 0 for an empty pipeline)."""
    fewest = np.maximum(-(-tokens // capacity), 1)
    if pp == 1:
        return np.where(pieces > 0, work + fewest * c, 0.0)
    most = np.maximum(pieces, fewest)
    with np.errstate(over="ignore"):  # a denormal c sends v* to inf, clipped to `most` as the scalar path does
        v = np.sqrt(kappa * (pp - 1) * work / c) if c > 0 else most.astype(np.float64)
    v = np.minimum(np.maximum(v, fewest), most)
    spread = kappa * work / np.maximum(v, 1)
    return np.where(pieces > 0, work + v * c + (pp - 1) * (c + np.maximum(spread, longest) + 2.0 * p2p_ms), 0.0)
