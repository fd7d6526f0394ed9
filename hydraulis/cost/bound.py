"""Lower bounds of any plan of a batch (design §6), used to report plan quality.

**Work and longest sequence** (design §6, :func:`lower_bound_ms` is the first term)::

    work    = Σ_i min_{k : C_k ≥ s_i} D_k·w_k(s_i) / N,     w_k(s) = a_k·s² + b_k·s
    longest = max_i min_{k : C_k ≥ s_i} pp_k·(c_k + w_k(s_i))
    pool    = max(work, longest)

A sequence ``i`` of length ``s_i`` occupies the ``D_k = cp·tp·pp`` devices of a scheme ``k`` that
can hold it (``C_k``: its longest sequence) for at least its own work on every stage; spread
perfectly over all ``N`` devices that is ``work``. Its micro-batch's forward crosses the ``pp_k``
stages one after the other and its backward crosses them back, so its pipeline takes at least
``pp_k·(c_k + w_k(s_i))``.

The details: :func:`step_bound`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.scheme_profile import sequence_work_ms
from hydraulis.base.types import Scheme, TimeCoefficients


def lower_bound_ms(
    lengths: Sequence[int] | np.ndarray,
    schemes: Sequence[tuple[Scheme, TimeCoefficients, int]],
    devices: int,
) -> float:
    """``work`` of :func:`step_bound` over candidate ``(scheme, coefficients, max_seq_len)``
    triples and ``devices``."""
    return step_bound(lengths, [BoundScheme(s, t, c) for s, t, c in schemes], devices).work_ms


PRECISION = 1e-4
"""The bisection for ``F`` (or ``G``) stops when the interval holding it is this narrow
(relative, and absolute below 1 ms); it returns the interval's infeasible end, a bound still."""


@dataclass(frozen=True)
class BoundScheme:
    """A scheme a plan may use: its coefficients, its longest sequence ``capacity`` (which
    also bounds a micro-batch's tokens) and the reduction ``reduce_ms`` a strategy using it
    pays at least."""

    scheme: Scheme
    time: TimeCoefficients
    capacity: int
    reduce_ms: float = 0.0


@dataclass(frozen=True)
class StepBound:
    """:func:`step_bound`'s ``work``, ``longest`` and ``tight`` for one batch."""

    work_ms: float
    longest_ms: float
    tight_ms: float

    @property
    def pool_ms(self) -> float:
        """design §6's bound, ``max(work, longest)``."""
        return max(self.work_ms, self.longest_ms)


def step_bound(lengths: Sequence[int] | np.ndarray, schemes: Sequence[BoundScheme], devices: int,
               p2p_ms: float = 0.0, solo_free: bool = False) -> StepBound:
    """The bounds of :func:`step_bound` for sequences of ``lengths`` tokens on ``devices``
    devices; :class:`HydraulisError` naming a sequence no scheme holds.

    **The tight bound** (:func:`step_bound`) adds what every plan also pays — the fixed cost of
    its micro-batches, the gradient reduction into the optimizer layout — and that a sequence must
    finish on a scheme fast enough for it, which may cost more devices than the cheapest::

        tight = min_ρ [ ρ + max(F_ρ, G_ρ) ]
        F_ρ = min { T : Σ_i min_{k ∈ K_ρ(i, T)} D_k·w_k(s_i) / (T − pp_k·c_k) ≤ N }
        G_ρ = min { T : Σ_i min_{k ∈ K_ρ(i, T)} D_k·(w_k(s_i) + c_k·s_i/C_k) / (T − (pp_k − 1)·c_k) ≤ N }
        K_ρ(i, T) = {k : r_k ≤ ρ, C_k ≥ s_i, h_k(s_i) ≤ T},   h_k(s) = pp_k·(c_k + w_k(s)) + 2·(pp_k − 1)·d

    over the reduction levels ``ρ`` (the distinct reductions ``r_k`` of the schemes). *Proof that
    ``tight ≤`` every plan's step time.* Take any plan: a strategy (pipelines ``p`` of schemes
    ``k_p``, ``Σ_p D_{k_p} ≤ N``), each pipeline's pieces packed into ``v_p ≥ 1`` micro-batches of at
    most ``C_{k_p}`` tokens; let ``T = max_p T_p``. (1) Its step time is ``T + ρ*`` with
    ``ρ* = max_p r_{k_p}`` — the least sharded pipeline decides the reduction
    (:mod:`hydraulis.cost.step`) — so every scheme it uses has ``r_k ≤ ρ*``. (2) The pipeline
    holding piece ``i`` runs its micro-batch's forward and backward through all its stages in
    sequence: ``T ≥ T_p ≥ h_{k_p}(s_i)``, so ``k_p ∈ K_{ρ*}(i, T)``. (3) Every stage runs every
    micro-batch, and under 1F1B the last stage starts ``(pp − 1)`` forwards late and the first ends
    ``(pp − 1)`` backwards late, each at least ``c``: ``T_p ≥ W_p + v_p·c + (pp − 1)·c`` with
    ``W_p = Σ_{i∈p} w(s_i)`` (:mod:`hydraulis.cost.pipeline`, the closed form is a lower bound).
    With ``v_p ≥ 1`` that gives ``W_p ≤ T − pp·c``; with ``v_p ≥ Σ_{i∈p} s_i/C`` it gives
    ``Σ_{i∈p} (w(s_i) + c·s_i/C) ≤ T − (pp − 1)·c``. (4) Summing the first over the ``n_k`` pipelines of
    scheme ``k``: ``n_k ≥ Σ_{i on k} w_k(s_i)/(T − pp_k·c_k)``, and ``N ≥ Σ_k n_k·D_k ≥`` the sum in
    ``F``, each piece counted on its own scheme, at least the minimum over ``K_{ρ*}(i, T)``. The
    sum only shrinks as ``T`` grows, so ``T ≥ F_{ρ*}``; the same with the second inequality gives
    ``T ≥ G_{ρ*}``. So the plan takes ``≥ ρ* + max(F_{ρ*}, G_{ρ*}) ≥ tight``. At its ``T`` every
    piece fits its scheme in time and ``G``'s sum is at least ``Σ_i min_k D_k·w_k(s_i)/T``, so each
    level is at least ``max(work, longest)``: ``pool ≤ tight`` (the code also takes the maximum with
    those two terms, computed exactly, so that the bisection's precision never puts ``tight`` below them). When a lone pipeline needs no
    reduction (its optimizer layout has ``dp = 1``, ``solo_free``), one more level bounds those
    plans: ``ρ = 0`` and one pipeline of some scheme ``k`` holding every piece,
    ``max(Σ_i (w_k(s_i) + c_k·s_i/C_k) + (pp_k − 1)·c_k, max_i h_k(s_i))``. ``F`` and ``G`` are found by
    bisection, keeping the infeasible end: a bound still.

    **The estimate's bound per reduction level** (:func:`level_bounds`). design §6's estimate of a
    plan's compute part, ``E = max_p (Σ_j t_j + (pp_p − 1)·max_j t_j)`` (the figure plan-quality
    targets are stated in), charges a pipeline's fill and drain with its *largest* micro-batch, so it
    also bounds ``W_p`` through the bubble: ``max_j t_j ≥ c + W_p/v_p`` (the largest is at least the
    mean), and by the arithmetic–geometric mean ``v·c + (pp − 1)·W/v ≥ 2·√((pp − 1)·W·c)``::

        E ≥ W_p + v_p·c + (pp − 1)·(c + W_p/v_p) ≥ (√W_p + √((pp − 1)·c))²
        ⇒ W_p ≤ B_k(E) = min(E − pp·c, (√E − √((pp − 1)·c))²)

    ``F`` with room ``B_k(E)`` instead of ``E − pp·c``, with ``G`` and the crossing ``pp·(c + w)``
    (no hand-offs in ``E``), bounds ``E`` of every plan using only schemes with ``r_k ≤ ρ``: that is
    ``estimate_ms`` of level ``ρ``; ``compute_ms`` is ``max(F_ρ, G_ρ)`` above (a bound of the exact
    1F1B, which may end before ``E``). So a plan whose ``E`` is below ``x·pool`` exists only at
    levels with ``estimate_ms ≤ x·pool``, and none of those plans predicts a step below
    ``min {ρ + compute_ms : estimate_ms(ρ) ≤ x·pool}``. Worked example: one (1,1,4) pipeline
    (``w(s) = s``, ``c = 1``, N = 4) and sixteen 1-token pieces: ``E − pp·c`` gives ``E ≥ 20``, the
    bubble ``(√16 + √3)² = 32.86``; the best plan, 8 micro-batches of 2, has ``E = 16 + 8 + 3·3 = 33``.

    What ``tight`` sees that ``pool`` does not: at 1,024 H100s (LLaMA-32B, 1.6M tokens) five
    32K sequences finish within 1,000 ms only on (8,8,1) pipelines of 64 devices, and with them the
    step's work needs more than 1,024 devices — so no plan computes the step in 1,000 ms, while
    ``pool`` = 775 ms; and every scheme with ``tp·pp < 8`` brings a reduction of ≥ 650 ms.

    Worked example: one sequence of 4,096 tokens, schemes (1,1,2) with ``a = 1.37e-6, b = 0.0946,
    c = 15`` (D = 2, C = 11,000, r = 300 ms) and (1,2,1) with ``a = 2.05e-6, b = 0.0967, c = 65``
    (D = 2, C = 20,000, r = 300 ms), N = 4: ``work = min(2·410.5, 2·430.5)/4 = 205.2`` ms,
    ``longest = min(2·(15 + 410.5), 65 + 430.5) = 495.5`` ms, ``pool = 495.5``; at ``T = 495.5``
    only (1,2,1) finishes the sequence and needs ``2·430.5/(495.5 − 65) = 2.0 ≤ 4`` devices, so
    ``F = G = 495.5`` and ``tight = 300 + 495.5 = 795.5`` ms.
    """
    forms = _Forms.of(lengths, schemes, devices, p2p_ms)
    tight = min((level.reduce_ms + level.compute_ms for level in _levels(forms, estimate=False)), default=np.inf)
    if solo_free:
        f = forms
        for k in np.flatnonzero((f.size[:, 0] <= devices) & f.fits.all(axis=1)):
            alone = (f.work[k] + f.c[k] * f.s / f.capacity[k]).sum() + (f.pp[k] - 1.0) * f.c[k]
            tight = min(tight, max(float(alone[0]), f.handoffs[k].max(initial=0.0)))
    return StepBound(float(np.where(forms.fits, forms.size * forms.work, np.inf).min(axis=0).sum() / devices),
                     _longest(forms.crossing, forms.fits), float(tight))


@dataclass(frozen=True)
class LevelBound:
    """At reduction level ``reduce_ms`` (plans whose schemes all have ``r_k ≤ reduce_ms``): the
    least compute time of the exact 1F1B (``compute_ms``, :func:`step_bound`'s ``max(F, G)``) and
    of design §6's estimate ``E`` (``estimate_ms``), :func:`step_bound`."""

    reduce_ms: float
    compute_ms: float
    estimate_ms: float


def level_bounds(lengths: Sequence[int] | np.ndarray, schemes: Sequence[BoundScheme], devices: int,
                 p2p_ms: float = 0.0) -> tuple[LevelBound, ...]:
    """:class:`LevelBound` of every reduction level at which the schemes hold every sequence,
    lowest level first."""
    return tuple(_levels(_Forms.of(lengths, schemes, devices, p2p_ms), estimate=True))


@dataclass(frozen=True)
class _Forms:
    """The per-scheme (rows) and per-sequence (columns) arrays the bounds are made of."""

    s: np.ndarray
    devices: int
    size: np.ndarray
    pp: np.ndarray
    c: np.ndarray
    capacity: np.ndarray
    reduction: np.ndarray
    fits: np.ndarray
    work: np.ndarray
    crossing: np.ndarray
    handoffs: np.ndarray

    @classmethod
    def of(cls, lengths: Sequence[int] | np.ndarray, schemes: Sequence[BoundScheme], devices: int,
           p2p_ms: float) -> _Forms:
        require(devices > 0, "devices", devices, "must be > 0")
        s = np.asarray(lengths, dtype=np.float64)
        size = np.array([k.scheme.devices for k in schemes], dtype=np.float64)[:, None]
        pp = np.array([k.scheme.pp for k in schemes], dtype=np.float64)[:, None]
        a, b, c = (np.array([getattr(k.time, name) for k in schemes])[:, None] for name in ("a", "b", "c"))
        capacity = np.array([k.capacity for k in schemes], dtype=np.float64)[:, None]
        fits = s[None, :] <= capacity
        _check_held(s, fits, capacity)
        work = sequence_work_ms(a, b, s)
        crossing = pp * (c + work)
        return cls(s, devices, size, pp, c, capacity, np.array([k.reduce_ms for k in schemes]), fits, work,
                   crossing, crossing + 2.0 * (pp - 1.0) * p2p_ms)

    def bubble_room(self, total: float) -> np.ndarray:
        return bubble_room(total, self.pp, self.c)


def bubble_room(total: float, pp: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``B_k(E) = min(E − pp·c, (√E − √((pp − 1)·c))²)`` of :func:`step_bound`, per scheme
    (≤ 0: none): the most stage work a pipeline does within design §6's estimate ``E``."""
    root = np.maximum(math.sqrt(max(total, 0.0)) - np.sqrt((pp - 1.0) * c), 0.0)
    return np.minimum(total - pp * c, root * root)


def _levels(f: _Forms, estimate: bool) -> Iterator[LevelBound]:
    """Per reduction level: ``max(F, G)`` of the exact 1F1B and (``estimate``) of ``E``."""
    spread_share = f.size * (f.work + f.c * f.s / f.capacity)
    stages = f.pp - 1.0
    for level in np.unique(f.reduction):
        usable = f.fits & (f.reduction <= level)[:, None]
        if not usable.any(axis=0).all():
            continue
        spread = float(np.where(usable, spread_share, np.inf).min(axis=0).sum()) / f.devices
        g = _least_time(f.devices, usable, f.handoffs, spread_share, lambda t: t - stages * f.c)
        compute = max(spread, _longest(f.handoffs, usable), g,
                      _least_time(f.devices, usable, f.handoffs, f.size * f.work, lambda t: t - f.pp * f.c))
        bubble = np.nan
        if estimate:
            bubble = max(spread, _longest(f.crossing, usable),
                         _least_time(f.devices, usable, f.crossing, spread_share, lambda t: t - stages * f.c),
                         _least_time(f.devices, usable, f.crossing, f.size * f.work, f.bubble_room))
        yield LevelBound(float(level), compute, bubble)


def _least_time(devices: int, usable: np.ndarray, handoffs: np.ndarray, share: np.ndarray,
                room_at: Callable[[float], np.ndarray]) -> float:
    """``min {T : Σ_i min_{k usable for i, h_k(s_i) ≤ T} share[k, i]/room_k(T) ≤ N}`` by
    bisection to :data:`PRECISION`, returning the infeasible end (a lower bound of the minimum);
    ``room_at(T)`` is the per-scheme room (a column), increasing in ``T``."""

    def enough(total: float) -> bool:
        room = room_at(total)
        ok = usable & (handoffs <= total) & (room > 0)
        need = np.where(ok, share / np.where(room > 0, room, 1.0), np.inf).min(axis=0)
        return bool(np.isfinite(need).all() and need.sum() <= devices)

    lo = _longest(handoffs, usable)
    if enough(lo):
        return lo
    hi = 2.0 * max(lo, 1e-9)
    while not enough(hi):
        lo, hi = hi, 2.0 * hi
    while hi - lo > PRECISION * max(hi, 1.0):
        middle = 0.5 * (lo + hi)
        lo, hi = (lo, middle) if enough(middle) else (middle, hi)
    return lo


def _longest(times: np.ndarray, usable: np.ndarray) -> float:
    """``max_i min_{k usable for i} times[k, i]`` (0 for no sequences)."""
    return float(np.where(usable, times, np.inf).min(axis=0).max(initial=0.0))


def _check_held(s: np.ndarray, fits: np.ndarray, capacity: np.ndarray) -> None:
    held = fits.any(axis=0)
    if not held.all():
        index = int(np.flatnonzero(~held)[0])
        raise HydraulisError(f"lengths[{index}]", int(s[index]),
                             f"exceeds the longest sequence any scheme can hold ({int(capacity.max(initial=0))})")
