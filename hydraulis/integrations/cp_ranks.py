"""The rank options of hybrid context parallelism: what a sample costs and how long it may be on
``k`` data×context-parallel ranks of ``tp`` devices each (design §6, docs/integrations.md).

A sample of ``s`` tokens run with context-parallel size ``k`` occupies ``k`` ranks, each a
``(k, tp, 1)`` replica's share, for

    t_k(s) = c_k + a_k·s² + b_k·s          (one forward/backward per sub-sample, design §6.1)

and fits when ``s ≤ C_k = min(S_k, k·m)``: ``S_k`` the longest sequence the space's
``(k, tp, 1)`` holds under the optimizer layout ``dp{n}·tp{tp}·pp1`` (Megatron's distributed
optimizer shards over all ``n`` DP×CP ranks; design §6.4), ``m`` the caller's
``max_seq_len_per_rank`` (Megatron's own cap: ``k`` ranks hold ``k·m`` tokens). Only powers of
two ``k`` that divide ``n`` are options (Megatron creates its hybrid groups as aligned blocks of
every power of two).

Worked example: LLaMA-7B analytic on A800s, tp 8, ``n = 64``, ``m = 16,384``: ``k = 1`` holds
16,384 tokens, ``k = 2`` 32,768; a 20K sample needs ``k = 2`` and costs ``c_2 + a_2·20,000² +
b_2·20,000`` on each of its two ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.types import OptimizerLayout, Scheme, SchemeSpace, TimeCoefficients
from hydraulis.cost.memory import memory_breakdown


@dataclass(frozen=True)
class CPOption:
    """Context-parallel size ``k``: its per-rank time coefficients and the longest sample it holds."""

    cp: int
    time: TimeCoefficients
    capacity: int

    def __post_init__(self) -> None:
        require_int(self.cp, "cp", minimum=1)
        require(self.cp & (self.cp - 1) == 0, "cp", self.cp, "must be a power of two")
        require_int(self.capacity, "capacity", minimum=1)

    def ms(self, length: int) -> float:
        """``t_k(s)`` of the module docstring."""
        return self.time.sequence_ms(length)


@dataclass(frozen=True)
class CPRanks:
    """``ranks`` DP×CP ranks of ``tp`` devices each and their options, ``cp`` ascending."""

    ranks: int
    tp: int
    options: tuple[CPOption, ...]

    def __post_init__(self) -> None:
        require_int(self.ranks, "dp_cp_group.size()", minimum=1)
        require(len(self.options) > 0, "space", [], "has no (k, tp, 1) scheme that holds a token")
        sizes = [o.cp for o in self.options]
        require(sizes == sorted(set(sizes)), "options", sizes, "must list each cp once, ascending")
        for o in self.options:
            require(self.ranks % o.cp == 0, "dp_cp_group.size()", self.ranks, f"must be a multiple of cp {o.cp}")

    @property
    def longest(self) -> int:
        return max(o.capacity for o in self.options)

    def option(self, cp: int) -> CPOption:
        """The option of context-parallel size ``cp``."""
        for o in self.options:
            if o.cp == cp:
                return o
        raise HydraulisError("cp", cp, f"is not an option: {[o.cp for o in self.options]}")

    def check_lengths(self, lengths: np.ndarray) -> None:
        """Raise unless there is a sample and every one fits some option."""
        require(lengths.size > 0, "sample_id_seqlens", [], "is empty: give at least one sample")
        require(bool((lengths > 0).all()), "sample_id_seqlens", int(lengths.min()), "holds a length below 1")
        longest = int(lengths.max())
        require(longest <= self.longest, "sample length", longest,
                f"exceeds {self.longest} tokens, the most any (k, {self.tp}, 1) rank group holds")


def cp_ranks(space: SchemeSpace, tp: int, ranks: int, max_seq_len_per_rank: int) -> CPRanks:
    """The options of the module docstring for ``ranks`` DP×CP ranks of the space's
    ``(k, tp, 1)`` schemes (those without options); ``ValueError`` naming field, value and limit.
    """
    require_int(max_seq_len_per_rank, "max_seq_len_per_rank", minimum=1)
    require_int(ranks, "dp_cp_group.size()", minimum=1)
    tps = sorted({p.scheme.tp for p in space.profiles if p.scheme.pp == 1})
    require(tp in tps, "tp", tp, f"is not a tensor-parallel degree of the space's (k, tp, 1) schemes: {tps}")
    profiles = sorted((p for p in space.profiles if p.scheme == Scheme(p.scheme.cp, tp, 1)
                       and p.scheme.cp & (p.scheme.cp - 1) == 0), key=lambda p: p.scheme.cp)
    require(bool(profiles), "tp", tp, "has no (k, tp, 1) scheme with a power-of-two k in the space")
    smallest = profiles[0].scheme.cp
    require(ranks % smallest == 0, "dp_cp_group.size()", ranks,
            f"must be a multiple of {smallest}, the smallest context-parallel size of the space's (k, {tp}, 1)")
    layout = OptimizerLayout(dp=ranks, tp=tp, pp=1)
    options = []
    for profile in profiles:
        k = profile.scheme.cp
        if k > ranks or ranks % k:
            continue
        held = min(memory_breakdown(space.memory, space.model, profile, layout).max_seq_len, k * max_seq_len_per_rank)
        if held > 0:
            options.append(CPOption(k, profile.time, held))
    return CPRanks(ranks, tp, tuple(options))
