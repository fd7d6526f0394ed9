"""Plans against the bounds with per-step strategy synthesis, planning latency, and the
communicators a run creates (issue 17's acceptance figures).

The LLaMA-7B cases use the original system's measured pool; the 1,024-device cases (LLaMA-13B,
LLaMA-32B) an analytic space (``--device``: H100 by default, A800 as paper_exp's 1,024-device
settings) that composes every scheme's variants (sequence parallelism, recomputation), as
``hydraulis simulate`` and paper_exp plan (``--variants none``: the plain schemes only).

For each case: propose for the workload, then plan ``--steps`` held-out steps (seed 1) with
:func:`hydraulis.dispatch.synthesis.synthesise_step` — synthesis off, from the proposal's schemes,
and from the scheme space's — the communicators earlier steps created known and the synthesis
memory carried on, as a run does. Per step:

* the **compute part** of the plan from its pipelines and micro-batches, ``max_p (Σ_j t_j +
  (pp − 1)·max_j t_j)`` (design §6's estimate), over the **pool bound** ``max(work, longest)``
  over every usable scheme of the space (design §6);
* the predicted step time (exact 1F1B, reduction, switch) over the **tight bound**
  (cost/bound.py: fixed costs, the reduction, every sequence on a scheme fast enough);
* the planning time (``planning_ms``, dispatch plus synthesis, measured inside ``synthesise_step``);

and over the run: the steps that ran a synthesised strategy and the distinct communicators
(proposal's included) against the bound of aligned placement (hydraulis/base/placement.py).

What any plan could reach (design §8.2): per reduction level ``ρ`` (plans whose schemes all
reduce in at most ``ρ``) the closed-form least compute part by design §6's estimate over the pool
bound and the least predicted step ``ρ + compute`` (:func:`hydraulis.cost.level_bounds`); then on
the first ``--lp-steps`` steps the linear program of :mod:`hydraulis.dispatch.device_bound`
(long sequences hold whole pipelines): the least compute part of *any* plan over the pool bound,
and the last mode's compute part over the program's bound at its own level. ``--target x`` asks,
per step, whether a plan with compute part ≤ ``x``·pool exists at all and whether every such plan
predicts a slower step than the last mode's.

    python benchmarks/synthesis_quality.py [--steps 100] [--cases 7b_32dev,7b_64dev,13b_1024dev,32b_1024dev]
                                           [--target 1.15] [--lp-steps 8] [--device h100-80g]
                                           [--modes off,proposal,space] [--evaluations 2] [--variants all|none]
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np
from tqdm import tqdm

from hydraulis.artifacts import read_lengths
from hydraulis.base.placement import communicator_bound
from hydraulis.base.presets import device_names
from hydraulis.base.solver import SolverName
from hydraulis.base.types import SYNTHESIS_EVALUATIONS_DEFAULT
from hydraulis.base.workload import sample_batches
from hydraulis.cli.output import table
from hydraulis.cost import BoundScheme, level_bounds, step_bound
from hydraulis.dispatch.device_bound import ComputeForm, devices_needed, least_compute_ms
from hydraulis.dispatch.gap import bound_at_level, plan_level_ms
from hydraulis.dispatch.menu import menu
from hydraulis.dispatch.synthesis import (
    Synthesise,
    SynthesisMemory,
    proposal_communicators,
    strategy_communicators,
    synthesis_options,
    synthesise_step,
)
from hydraulis.io.simulation_inputs import scheme_space_for
from hydraulis.planner import PlannerConfig, propose
from hydraulis.planner.config import Variants
from hydraulis.planner.options import proposal_options

MAX_SEQ_LEN = 32_768
SOLVER = SolverName.CBC
CASES = {
    "7b_32dev": ("bundled:7b", "llama-7b", 32, 200_000),
    "7b_64dev": ("bundled:7b", "llama-7b", 64, 200_000),
    "13b_1024dev": (None, "llama-13b", 1024, 1_600_000),
    "32b_1024dev": (None, "llama-32b", 1024, 1_600_000),
}
DEVICE = "h100-80g"
"""Device preset of the analytic cases by default (paper_exp's 1,024-device settings: a800-80g)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100, help="held-out steps per case (default 100)")
    parser.add_argument("--lengths", default="examples/data/longtail.txt",
                        help="document lengths the workload samples (default examples/data/longtail.txt)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated cases (default {','.join(CASES)})")
    parser.add_argument("--modes", default="off,proposal,space",
                        help="comma-separated --synthesise modes to plan with (default off,proposal,space)")
    parser.add_argument("--target", type=float, default=None,
                        help="compute part over the pool bound to test for: whether any plan reaches it")
    parser.add_argument("--lp-steps", type=int, default=8,
                        help="steps the linear program's bounds are computed on (default 8; 0: none)")
    parser.add_argument("--variants", choices=[v.value for v in Variants], default=Variants.ALL.value,
                        help="analytic cases: all (the space composes every scheme's variants — sequence "
                             "parallelism, recomputation — as simulate and paper_exp do) or none (default all)")
    parser.add_argument("--device", choices=device_names(), default=DEVICE,
                        help=f"device preset of the analytic cases (default {DEVICE}; paper_exp's 1,024-device "
                             "settings use a800-80g)")
    parser.add_argument("--evaluations", type=int, default=SYNTHESIS_EVALUATIONS_DEFAULT,
                        help="dispatcher plans per step a synthesis may spend "
                             f"(default {SYNTHESIS_EVALUATIONS_DEFAULT})")
    args = parser.parse_args()
    lengths = read_lengths(args.lengths)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}; {args.steps} held-out steps per case, {args.lengths}")
    for case in args.cases.split(","):
        source, model, devices, budget = CASES[case]
        variants = Variants(args.variants)
        space, _ = scheme_space_for(source, model, args.device, devices, 8, segments=variants is Variants.ALL)
        started = time.perf_counter()
        proposal = propose(space, lengths, PlannerConfig(devices=devices, devices_per_node=8, token_budget=budget,
                                                         max_seq_len=MAX_SEQ_LEN, variants=variants))
        print(f"\n{case}: {model} on {devices} devices ({space.provenance.source.value} space), {budget} tokens per "
              f"step; proposal in {time.perf_counter() - started:.1f} s: "
              + " | ".join(str(p.strategy) for p in proposal.strategies))
        pool = [BoundScheme(o.scheme, o.time, o.capacity, o.reduce_ms) for o in proposal_options(space, proposal)]
        batches = sample_batches(lengths, budget, args.steps, MAX_SEQ_LEN, seed=1)
        reachable = _Reachable(batches, pool, proposal)
        print(table(("reduction_ms", "best_compute/pool_median", "best_compute/pool_p90", "least_step_ms_median"),
                    reachable.rows()))
        rows = [_run(proposal, space, batches, pool, mode, args.evaluations, reachable)
                for mode in args.modes.split(",")]
        print(table(("synthesise", "compute/pool_median", "compute/pool_p90", "compute/best_at_level_median",
                     "predicted/tight_median", "mean_step_ms", "synthesised", "plan_ms_median", "plan_ms_p90",
                     "communicators", "bound"), rows))
        if args.lp_steps > 0:
            print(reachable.program_lines(args.lp_steps, args.target))


def _run(proposal, space, batches, pool, mode: str, evaluations: int, reachable: _Reachable) -> list:
    synthesis = synthesis_options(mode, evaluations, proposal, space)
    known = proposal_communicators(proposal)
    memory = SynthesisMemory()
    compute, at_level, tight, predicted, planning, ours, synthesised = [], [], [], [], [], [], 0
    for step, batch in enumerate(batches):
        plan, memory = synthesise_step(proposal, batch, synthesis=synthesis, known=known, memory=memory)
        strategy = plan.strategy(proposal)
        known |= strategy_communicators(strategy)
        bound = step_bound(batch, pool, proposal.devices, proposal.pipeline_model.p2p_ms)
        part = _compute_part(plan, proposal)
        compute.append(part / bound.pool_ms)
        level = plan_level_ms(plan, proposal)
        at_level.append(part / bound_at_level(reachable.levels[step], level).estimate_ms)
        ours.append((part, level, plan.predicted_ms))
        tight.append(plan.predicted_ms / bound.tight_ms)
        predicted.append(plan.predicted_ms)
        planning.append(plan.planning_ms)
        synthesised += plan.synthesis is not None
    reachable.ours = ours
    schemes = [g.scheme for g in menu(proposal, synthesis.schemes)]
    bound = communicator_bound(schemes, proposal.devices)
    return [mode if mode != Synthesise.OFF.value else "off", np.median(compute), np.percentile(compute, 90),
            np.median(at_level), np.median(tight), np.mean(predicted), f"{synthesised}/{len(batches)}",
            np.median(planning), np.percentile(planning, 90), len(known), bound]


class _Reachable:
    """Per step and reduction level, what any plan could reach; the last mode's plans."""

    def __init__(self, batches, pool, proposal) -> None:
        self.batches, self.pool, self.devices = batches, pool, proposal.devices
        self.pools = [step_bound(b, pool, proposal.devices).pool_ms for b in batches]
        self.levels = [level_bounds(b, pool, proposal.devices, proposal.pipeline_model.p2p_ms) for b in batches]
        self.ours: list[tuple[float, float, float]] = []
        """The last run mode's (compute part, reduction level, predicted step) per step."""

    def rows(self) -> list[list]:
        found = sorted({b.reduce_ms for levels in self.levels for b in levels})
        rows = []
        for level in found:
            ratio = [b.estimate_ms / pool for levels, pool in zip(self.levels, self.pools)
                     for b in levels if b.reduce_ms == level]
            least = [b.reduce_ms + b.compute_ms for levels in self.levels for b in levels if b.reduce_ms == level]
            rows.append([level, np.median(ratio), np.percentile(ratio, 90), np.median(least)])
        return rows

    def program_lines(self, steps: int, target: float | None) -> str:
        """The linear program's figures on the first ``steps`` steps (module docstring)."""
        best, mine, reachable, slower = [], [], 0, 0
        steps = min(steps, len(self.batches))
        for step in tqdm(range(steps), desc="linear program", leave=False, disable=steps < 2):
            batch, pool, levels = self.batches[step], self.pools[step], self.levels[step]
            best.append(least_compute_ms(batch, self.pool, self.devices, math.inf, ComputeForm.ESTIMATE,
                                         levels[-1].estimate_ms, SOLVER) / pool)
            part, level, predicted = self.ours[step]
            mine.append(part / least_compute_ms(batch, self.pool, self.devices, level * (1 + 1e-9),
                                                ComputeForm.ESTIMATE, bound_at_level(levels, level).estimate_ms, SOLVER))
            if target is not None:
                fast = [b.reduce_ms + b.compute_ms for b in levels
                        if devices_needed(batch, self.pool, target * pool, b.reduce_ms, ComputeForm.ESTIMATE,
                                          SOLVER) <= self.devices]
                reachable += bool(fast)
                slower += bool(fast) and min(fast) > predicted
        lines = [f"linear program, first {steps} steps: any plan's compute/pool >= {np.median(best):.4f} median "
                 f"(min {min(best):.4f}, max {max(best):.4f}); the last mode's compute / bound at its level "
                 f"{np.median(mine):.4f} median (max {max(mine):.4f})"]
        if target is not None:
            lines.append(f"compute/pool <= {target}: possible on {reachable}/{steps} steps; on {slower} of them every "
                         f"such plan predicts a slower step than the last mode's")
        return "\n".join(lines)


def _compute_part(plan, proposal) -> float:
    """``max_p (Σ_j t_j + (pp − 1)·max_j t_j)`` from the plan's pipelines and micro-batches."""
    worst = 0.0
    for group, pipeline in zip(plan.strategy(proposal).expanded(), plan.pipelines):
        times = [group.time.microbatch_ms(mb.lengths) for mb in pipeline.micro_batches]
        if times:
            worst = max(worst, sum(times) + (group.scheme.pp - 1) * max(times))
    return worst


if __name__ == "__main__":
    main()
