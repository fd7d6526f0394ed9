"""The mixed-cluster planner's recipe (design §7.4): sampled steps → options → plans per
serving range → a proposal.

1. sample ``steps`` global batches from the documents (filled to the token budget, cut to
   ``S``);
2. list the options (:mod:`.mixed_options`): plain schemes per group, cross-type staged
   pipelines from the split for several targets;
3. plan the type-segregated strategies (plain options only) and list the FlashFlex-style
   replicas (copies of one cross-type pipeline holding ``S``, as many as the groups take);
4. plan the mixed strategies over every option, starting also from 3's answers, one per
   serving range (:func:`~hydraulis.planner.mixed.plan_mixed_ranges`);
5. the proposal of 4's strategies (:func:`~hydraulis.planner.mixed.mixed_proposal`).

``hydraulis propose --cluster`` writes 5; ``hydraulis simulate --cluster`` compares 3 and 4 with
the baselines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.errors import require, require_int
from hydraulis.base.types import Proposal, Strategy
from hydraulis.base.workload import sample_batches
from hydraulis.planner.mixed import MixedPlan, MixedSearchConfig, mixed_proposal, plan_mixed_ranges, strategy_of
from hydraulis.planner.mixed_options import MixedOption, OptionsConfig, mixed_options


@dataclass(frozen=True)
class MixedPlannerConfig:
    """Tokens per step ``T``, longest sequence ``S``, steps sampled, seed, the search's
    evaluation budget, the cross-type pipelines considered (cp degrees, devices per group,
    targets as fractions of ``S``) and the serving ranges (fractions of ``S``)."""

    token_budget: int
    max_seq_len: int
    steps: int = 16
    seed: int = 0
    evaluations: int = 400
    cps: tuple[int, ...] = (1, 2, 4)
    budgets: tuple[int, ...] = (8, 16)
    targets: tuple[float, ...] = (1.0, 0.25)
    ranges: tuple[float, ...] = (1.0, 0.5)

    def __post_init__(self) -> None:
        for name in ("token_budget", "max_seq_len", "steps", "evaluations"):
            require_int(getattr(self, name), name, minimum=1)
        require(self.token_budget >= self.max_seq_len, "token_budget", self.token_budget,
                f"is smaller than one sequence of max_seq_len = {self.max_seq_len} tokens")
        for name in ("targets", "ranges"):
            values = getattr(self, name)
            require(bool(values) and all(0 < f <= 1 for f in values), name, list(values),
                    "must be fractions of max_seq_len in (0, 1]")

    @property
    def options(self) -> OptionsConfig:
        return OptionsConfig(self.max_seq_len, self.cps, self.budgets, self.targets)


@dataclass(frozen=True)
class ClusterPlans:
    """Steps 3–4 of the recipe: the type-segregated plans, the FlashFlex-style replicas and the
    mixed plans (one per serving range)."""

    segregated: tuple[MixedPlan, ...]
    replicas: tuple[Strategy, ...]
    mixed: tuple[MixedPlan, ...]


def propose_mixed(spaces: ClusterSpaces, documents: np.ndarray, config: MixedPlannerConfig) -> Proposal:
    """Steps 1–5 of the module docstring."""
    steps = sample_batches(documents, config.token_budget, config.steps, config.max_seq_len, config.seed)
    plans = plan_cluster(spaces, steps, mixed_options(spaces, config.options), config)
    return mixed_proposal(spaces, [p.strategy for p in plans.mixed], config.token_budget, config.max_seq_len,
                          "mixed-cluster planner: " + "; ".join(str(p.strategy) for p in plans.mixed),
                          [p.mean_ms for p in plans.mixed])


def plan_cluster(spaces: ClusterSpaces, steps: Sequence[np.ndarray], options: Sequence[MixedOption],
                 config: MixedPlannerConfig) -> ClusterPlans:
    """Steps 3–4 of the module docstring on sampled ``steps``."""
    search = MixedSearchConfig(config.max_seq_len, config.evaluations)
    segregated = plan_mixed_ranges(spaces, [o for o in options if not o.cross], steps, search, config.ranges)
    copies = replicas(spaces, [o for o in options if o.cross], config.max_seq_len)
    mixed = plan_mixed_ranges(spaces, options, steps, search, config.ranges,
                              starts=(*(p.strategy for p in segregated), *copies))
    return ClusterPlans(segregated, tuple(copies), mixed)


def replicas(spaces: ClusterSpaces, options: Sequence[MixedOption], target: int) -> list[Strategy]:
    """Per option holding ``target``: as many copies of it as every group it uses takes."""
    devices = [g.devices for g in spaces.cluster.groups]
    found = []
    for k, option in enumerate(options):
        if option.max_seq_len >= target:
            count = min(have // used for have, used in zip(devices, option.usage) if used > 0)
            found.append(strategy_of(options, [count * (i == k) for i in range(len(options))]))
    return found
