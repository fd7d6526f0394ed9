"""A lower bound of any plan of one step on a mixed cluster (design §6.7).

**Work over the cluster's aggregate speed.** Every sequence runs all ``L`` decoder layers
forward and backward on some devices. On group ``g`` a layer of ``(cp, tp)`` costs
``cp·tp·(a_l·s² + b_l·s)`` device-ms for a sequence of ``s`` tokens (the group's layer block,
:mod:`hydraulis.base.segments`); the cheapest over its ``(cp, tp)`` gives ``w_g(s) = L·min_(cp,tp)
cp·tp·(a_l·s² + b_l·s)`` — no fixed cost, no ends, no hand-off, no memory limit, so every
pipeline, plain or staged, spends at least ``f·w_g(s)`` on ``g`` for a share ``f`` of a
sequence's layers it runs there. With ``f_ig`` the share of sequence ``i`` run on group ``g``
(``Σ_g f_ig = 1``), a step of ``T`` ms has ``Σ_i f_ig·w_g(s_i) ≤ N_g·T`` for every ``g``, so

    T ≥ W* = min_f max_g Σ_i f_ig·w_g(s_i) / N_g

The details: :func:`mixed_bound`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.scheme_profile import sequence_work_ms
from hydraulis.base.types import SchemeSpace
from hydraulis.cost.staged import StagedCost


@dataclass(frozen=True)
class MixedBound:
    """``W*``, the longest sequence's crossing and their maximum, in ms."""

    work_ms: float
    longest_ms: float

    @property
    def bound_ms(self) -> float:
        return max(self.work_ms, self.longest_ms)


def layer_work_coefficients(spaces: ClusterSpaces) -> list[list[tuple[float, float]]]:
    """Per group, ``(L·cp·tp·a_l, L·cp·tp·b_l)`` of every ``(cp, tp)`` layer block of its space."""
    layers = spaces.model.layers
    groups = []
    for space in spaces.spaces:
        blocks = [(layers * s.cp * s.tp * s.layer.time.a, layers * s.cp * s.tp * s.layer.time.b)
                  for s in space.segments if not s.sp]
        groups.append(blocks or _from_profiles(space, layers))
    return groups


def mixed_bound(coefficients: Sequence[Sequence[tuple[float, float]]], devices: Sequence[int],
                lengths: Sequence[int] | np.ndarray, longest: Sequence[StagedCost]) -> MixedBound:
    """The bound of :func:`mixed_bound` for one step of ``lengths``; ``coefficients`` from
    :func:`layer_work_coefficients`, ``longest`` the candidate pipelines holding its longest.

    With two groups an optimal ``f`` runs the sequences in decreasing order of
    ``w_1(s)/w_2(s)`` on group 2 up to one split sequence and the rest on group 1 (the linear
    program has two load rows, so an optimal basic solution splits at most one sequence, and
    exchanging shares by that ratio never raises the larger load): ``W*`` is where the two loads
    cross. With more groups we use the weaker ``Σ_i min_g w_g(s_i) / N``.

    **The longest sequence** must cross every stage of one pipeline forward and backward:
    ``T ≥ min_k Σ_σ t_{k,σ}(s_max) + 2(p_k − 1)·d`` over the candidate pipelines ``k`` that hold it
    (on the cost model's pipelines, not every conceivable one).

    ``bound = max(W*, longest)``. Worked example: two groups, ``N = (1, 1)``, one sequence with
    ``w = (4, 2)``: it is split ``f = (1/3, 2/3)`` and ``W* = 4/3``; the longest-sequence term of
    a pipeline of one stage of time 2 is 2, so the bound is 2.
    """
    s = np.asarray(lengths, dtype=np.float64)
    work = np.array([sequence_work_ms(np.array(group)[:, :1], np.array(group)[:, 1:], s).min(axis=0)
                     for group in coefficients])
    n = np.asarray(devices, dtype=np.float64)
    if len(n) == 2:
        work_ms = _two_groups(work, n)
    else:
        work_ms = float(work.min(axis=0).sum() / n.sum())
    top = float(s.max())
    crossing = [sum(t.sequence_ms(top) for t in cost.stage_times)
                + 2 * (cost.scheme.pp - 1) * cost.pipeline_model.p2p_ms for cost in longest]
    return MixedBound(work_ms, min(crossing, default=0.0))


def _two_groups(work: np.ndarray, n: np.ndarray) -> float:
    """``W*`` for two groups (:func:`mixed_bound`): sequences by decreasing ``w_1/w_2`` go to group 2."""
    order = np.argsort(-(work[0] / np.maximum(work[1], 1e-300)), kind="stable")
    w1, w2 = work[0][order], work[1][order]
    on_second = np.concatenate(([0.0], np.cumsum(w2))) / n[1]
    on_first = np.concatenate((np.cumsum(w1[::-1])[::-1], [0.0])) / n[0]
    k = int(np.searchsorted(on_second - on_first, 0.0))
    if k == 0:
        return float(on_first[0])
    # sequence k − 1 is split: θ of it on group 2, 1 − θ on group 1
    i = k - 1
    base2, base1 = on_second[i], on_first[i + 1]
    theta = (base1 + w1[i] / n[0] - base2) / (w2[i] / n[1] + w1[i] / n[0])
    return float(base2 + theta * w2[i] / n[1])


def _from_profiles(space: SchemeSpace, layers: int) -> list[tuple[float, float]]:
    """Without segments: a profile's per-layer share ``(a, b)/⌈L/pp⌉`` on its ``cp·tp`` devices."""
    return [(layers * p.scheme.cp * p.scheme.tp * p.time.a / -(-layers // p.scheme.pp),
             layers * p.scheme.cp * p.scheme.tp * p.time.b / -(-layers // p.scheme.pp)) for p in space.profiles]
