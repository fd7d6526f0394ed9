"""What the caller can choose about one dispatch: seed, solver budget, alignment, oversize policy."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hydraulis.base.errors import require, require_int, require_number
from hydraulis.base.limits import ALIGNMENT, ILP_NODES, ILP_TIME_LIMIT_S, SEED
from hydraulis.base.solver import SolverName


class OversizePolicy(str, Enum):
    """What to do with a sequence longer than every pipeline of the proposal can hold."""

    ERROR = "error"
    """Raise :class:`~hydraulis.base.errors.HydraulisError` naming the sequence, its length and the limit."""
    TRUNCATE = "truncate"
    """Keep its first ``limit`` tokens."""
    SPLIT = "split"
    """Cut it into ``⌊s/limit⌋`` pieces of ``limit`` tokens and the remainder; every piece keeps
    the sequence's index, and a micro-batch lists the piece lengths."""


@dataclass(frozen=True)
class DispatchOptions:
    """Options of :func:`hydraulis.dispatch.dispatch`.

    * ``seed`` — orders sequences of equal length before the (otherwise deterministic)
      algorithms run: the same seed gives the same plan, another seed an equally good one.
    * ``ilp_nodes`` — branch-and-bound nodes of each integer program that tries to improve the
      slowest pipeline's packing (:mod:`hydraulis.dispatch.ilp`); a count of work, so the plan
      depends on the inputs, the seed and this budget only. 0 (the default: dispatch runs on
      every step's critical path, and the greedy packing is compared with the program's proven
      optima by ``benchmarks/stage2_vs_ilp.py``) skips it, and the plan's notes say so.
    * ``ilp_solver`` — CBC (default) or HiGHS, which also reports how far a stopped program's
      answer may be from the optimum.
    * ``ilp_time_limit_s`` — the safety stop of all the step's integer programs together: it
      does not fire in normal use; when it does, the pipeline's status is ``ilp_time_limit``.
    * ``ilp_max_sequences`` — the integer program is only built for pipelines with at most this
      many sequences (its size grows as sequences × micro-batches).
    * ``alignment`` — every sequence occupies ``⌈s/alignment⌉·alignment`` tokens of its
      micro-batch (``cu_seqlens`` uses the same rounding); capacities and times use those tokens.
    * ``oversize`` — see :class:`OversizePolicy`.
    * ``local_moves`` — stage-1 improvement moves after the longest-first pass (0: none).
    * ``bubble_factor`` — κ of the stage-1 estimate of a pipeline's 1F1B overhead (see
      :mod:`hydraulis.dispatch.estimate`): 1 for equal micro-batches, ≈ 0.75 for the ramped
      profiles stage 2 builds.
    """

    seed: int = 0
    ilp_nodes: int = 0
    ilp_solver: SolverName = SolverName.CBC
    ilp_time_limit_s: float = 60.0
    ilp_max_sequences: int = 48
    alignment: int = 1
    oversize: OversizePolicy = OversizePolicy.ERROR
    local_moves: int = 64
    bubble_factor: float = 0.75

    def __post_init__(self) -> None:
        SEED.check(self.seed, "seed")
        ILP_NODES.check(self.ilp_nodes, "ilp_nodes")
        require(isinstance(self.ilp_solver, SolverName), "ilp_solver", self.ilp_solver,
                f"must be one of {[s.value for s in SolverName]}")
        ILP_TIME_LIMIT_S.check(self.ilp_time_limit_s, "ilp_time_limit_s")
        require_int(self.ilp_max_sequences, "ilp_max_sequences", minimum=1)
        ALIGNMENT.check(self.alignment, "alignment")
        require(isinstance(self.oversize, OversizePolicy), "oversize", self.oversize,
                f"must be one of {[p.value for p in OversizePolicy]}")
        require_int(self.local_moves, "local_moves", minimum=0)
        value = require_number(self.bubble_factor, "bubble_factor", maximum=1.0)
        require(value > 0, "bubble_factor", value, "must be > 0")
