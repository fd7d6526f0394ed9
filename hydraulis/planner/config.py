"""What a proposal is asked for: the cluster, the workload and the search's budgets.

A :class:`PlannerConfig` is validated at construction; the CLI saves it (resolved) into the
proposal's ``config`` so a proposal says what it was made from.

The details: :class:`PlannerConfig`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hydraulis.base.errors import require, require_int, require_number
from hydraulis.base.limits import (
    BUCKET_WIDTH,
    DEVICES,
    DEVICES_PER_NODE,
    LOSS_CHUNK_TOKENS,
    MAX_SEQ_LEN,
    PLANNER_STEPS,
    SEARCH_EVALUATIONS,
    SEED,
    SOLVER_NODES,
    STRATEGIES,
    TIME_LIMIT_S,
    TOKEN_BUDGET,
)
from hydraulis.base.solver import SolverName
from hydraulis.base.types import LOSS_CHUNK_TOKENS as RUNTIME_LOSS_CHUNK
from hydraulis.base.types import OptimizerLayout


class Variants(str, Enum):
    """Which variants of its schemes the planner may use (planner/variants.py)."""

    NONE = "none"
    """The plain schemes only: no sequence parallelism, no recomputation."""
    ALL = "all"
    """Every listed scheme, and in a space with segments each scheme's chosen variants."""


@dataclass(frozen=True)
class PlannerConfig:
    """Inputs of :func:`hydraulis.planner.propose` besides the scheme space and the lengths.

    ``devices`` must fill whole nodes of ``devices_per_node`` (or be fewer than one node);
    ``token_budget`` is a step's global token count, ``max_seq_len`` the longest sequence
    (documents are cut to it); ``strategies`` is the most strategies proposed (K);
    ``bucket_width`` the histogram bucket in tokens; ``steps`` how many steps are sampled
    (by ``seed``) to specialise and predict; ``tolerance`` is the relative gap at which the
    makespan bisection stops, ``solver_nodes`` the branch-and-bound nodes of each integer
    program; ``time_limit_s`` is the safety stop (:class:`PlannerConfig`); ``min_gain`` the relative step-time gain a strategy must bring over its neighbour on the
    steps it serves to be kept; ``work_classes`` caps the length classes an integer program
    sees; ``search_steps`` is how many of a range's sampled steps the local search judges
    strategies on and ``search_evaluations`` how many distinct strategies it may judge per
    range (0: no local search); ``optimizer_layout`` fixes the layout instead of choosing it;
    ``loss_chunk_tokens`` is the runtime's loss chunk the memory is priced with (0: whole).

    **Budgets, not clocks.** The proposal depends only on the inputs, the seed and these work
    budgets, never on how fast the machine is:

    ==========================  =====================================================  =========
    budget                      bounds                                                 default
    ==========================  =====================================================  =========
    ``tolerance``               the makespan bisection of each range: it stops when    0.002
                                ``hi − lo ≤ tolerance·hi``, so at most
                                ``⌈log₂((hi₀ − lo₀)/(tolerance·lo₀))⌉ + 1`` programs
    ``solver_nodes``            each integer program: branch-and-bound nodes (CBC      1000
                                ``maxNodes``, HiGHS ``mip_max_nodes``)
    ``search_evaluations``      the local search of each range: distinct strategies    120
                                judged, each on ``search_steps`` sampled steps
    ``time_limit_s``            nothing, normally: a wall-clock safety stop over all   300 s
                                programs and searches; when it fires the proposal's
                                solver status is ``time_limit`` and the answer is the
                                best found so far
    ==========================  =====================================================  =========

    With these defaults the programs of the bundled settings finish at their root node and the
    proposals take what they took under the former 20 s deadline (``benchmarks/proposal_time.py``):
    the safety stop is far above them.
    """

    devices: int
    devices_per_node: int
    token_budget: int
    max_seq_len: int
    strategies: int = 8
    bucket_width: int = 128
    steps: int = 64
    seed: int = 0
    solver: SolverName = SolverName.CBC
    time_limit_s: float = 300.0
    tolerance: float = 0.002
    solver_nodes: int = 1000
    min_gain: float = 0.01
    work_classes: int = 24
    search_steps: int = 16
    search_evaluations: int = 120
    optimizer_layout: OptimizerLayout | None = None
    variants: Variants = Variants.ALL
    loss_chunk_tokens: int = RUNTIME_LOSS_CHUNK

    def __post_init__(self) -> None:
        DEVICES.check(self.devices, "devices")
        DEVICES_PER_NODE.check(self.devices_per_node, "devices_per_node")
        require(self.devices < self.devices_per_node or self.devices % self.devices_per_node == 0,
                "devices", self.devices,
                f"must fill whole nodes: a multiple of devices_per_node = {self.devices_per_node}")
        TOKEN_BUDGET.check(self.token_budget, "token_budget")
        MAX_SEQ_LEN.check(self.max_seq_len, "max_seq_len")
        require(self.token_budget >= self.max_seq_len, "token_budget", self.token_budget,
                f"is smaller than one sequence of max_seq_len = {self.max_seq_len} tokens")
        STRATEGIES.check(self.strategies, "strategies")
        BUCKET_WIDTH.check(self.bucket_width, "bucket_width")
        PLANNER_STEPS.check(self.steps, "steps")
        SEED.check(self.seed, "seed")
        require(isinstance(self.solver, SolverName), "solver", self.solver,
                f"must be one of {[s.value for s in SolverName]}")
        TIME_LIMIT_S.check(self.time_limit_s, "time_limit_s")
        value = require_number(self.tolerance, "tolerance", maximum=0.5)
        require(value > 0, "tolerance", value, "must be > 0")
        SOLVER_NODES.check(self.solver_nodes, "solver_nodes")
        require_number(self.min_gain, "min_gain", minimum=0.0, maximum=1.0)
        require_int(self.work_classes, "work_classes", minimum=1)
        require_int(self.search_steps, "search_steps", minimum=1)
        SEARCH_EVALUATIONS.check(self.search_evaluations, "search_evaluations")
        require(isinstance(self.variants, Variants), "variants", self.variants,
                f"must be one of {[v.value for v in Variants]}")
        LOSS_CHUNK_TOKENS.check(self.loss_chunk_tokens, "loss_chunk_tokens")

    @property
    def node_size(self) -> int:
        """Devices of one node of this cluster (the whole cluster when it is less than a node)."""
        return min(self.devices, self.devices_per_node)

    def to_dict(self) -> dict:
        """The resolved configuration as plain JSON values (saved with the proposal)."""
        layout = self.optimizer_layout
        return {
            "devices": self.devices, "devices_per_node": self.devices_per_node,
            "token_budget": self.token_budget, "max_seq_len": self.max_seq_len,
            "strategies": self.strategies, "bucket_width": self.bucket_width, "steps": self.steps,
            "seed": self.seed, "solver": self.solver.value, "time_limit_s": self.time_limit_s,
            "tolerance": self.tolerance, "solver_nodes": self.solver_nodes, "min_gain": self.min_gain, "work_classes": self.work_classes,
            "search_steps": self.search_steps, "search_evaluations": self.search_evaluations,
            "optimizer_layout": None if layout is None else {"dp": layout.dp, "tp": layout.tp, "pp": layout.pp},
            "variants": self.variants.value, "loss_chunk_tokens": self.loss_chunk_tokens,
        }
