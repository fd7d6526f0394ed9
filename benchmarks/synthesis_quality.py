"""Plans against the bounds with per-step strategy synthesis, planning latency, and the
communicators a run creates (issue 17's acceptance figures).

For each case: propose for the workload, then plan ``--steps`` held-out steps (seed 1) with
:func:`hydraulis.dispatch.synthesis.plan_step` — synthesis off, from the proposal's schemes, and
from the scheme space's — the communicators earlier steps created known. Per step:

* the **compute part** of the plan from its pipelines and micro-batches, ``max_p (Σ_j t_j +
  (pp − 1)·max_j t_j)`` (design §4's estimate), over the **pool bound** ``max(work, longest)``
  over every usable scheme of the space (design §4);
* the predicted step time (exact 1F1B, reduction, switch) over the **tight bound**
  (cost/bound.py: fixed costs, the reduction, every sequence on a scheme fast enough);
* the planning time (``planning_ms``, dispatch plus synthesis, measured inside ``plan_step``);

and over the run: the steps that ran a synthesised strategy and the distinct communicators
(proposal's included) against the bound of aligned placement (hydraulis/placement.py).

    python benchmarks/synthesis_quality.py [--steps 100] [--cases 7b_32dev,7b_64dev,32b_1024dev]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from hydraulis.artifacts import read_lengths
from hydraulis.cli.output import table
from hydraulis.cost import BoundScheme, microbatch_time_ms, step_bound
from hydraulis.dispatch.synthesis import (
    Synthesise,
    menu,
    plan_step,
    proposal_communicators,
    strategy_communicators,
    synthesis_options,
)
from hydraulis.placement import communicator_bound
from hydraulis.planner import PlannerConfig, propose
from hydraulis.planner.options import proposal_options
from hydraulis.simulation.inputs import scheme_space_for
from hydraulis.workload import sample_batches

MAX_SEQ_LEN = 32_768
CASES = {
    "7b_32dev": ("bundled:7b", "llama-7b", 32, 200_000),
    "7b_64dev": ("bundled:7b", "llama-7b", 64, 200_000),
    "32b_1024dev": (None, "llama-32b", 1024, 1_600_000),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lengths", default="examples/data/longtail.txt")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--modes", default="off,proposal,space")
    args = parser.parse_args()
    lengths = read_lengths(args.lengths)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}; {args.steps} held-out steps per case, {args.lengths}")
    for case in args.cases.split(","):
        source, model, devices, budget = CASES[case]
        space, _ = scheme_space_for(source, model, "h100-80g", devices, 8)
        started = time.perf_counter()
        proposal = propose(space, lengths, PlannerConfig(devices=devices, devices_per_node=8, token_budget=budget,
                                                         max_seq_len=MAX_SEQ_LEN))
        print(f"\n{case}: {model} on {devices} devices ({space.provenance.source.value} space), {budget} tokens per "
              f"step; proposal in {time.perf_counter() - started:.1f} s: "
              + " | ".join(str(p.strategy) for p in proposal.strategies))
        pool = [BoundScheme(o.scheme, o.time, o.capacity, o.reduce_ms) for o in proposal_options(space, proposal)]
        batches = sample_batches(lengths, budget, args.steps, MAX_SEQ_LEN, seed=1)
        rows = [_run(proposal, space, batches, pool, mode) for mode in args.modes.split(",")]
        print(table(("synthesise", "compute/pool_median", "compute/pool_p90", "predicted/tight_median",
                     "mean_step_ms", "synthesised", "plan_ms_median", "plan_ms_p90", "communicators", "bound"), rows))


def _run(proposal, space, batches, pool, mode: str) -> list:
    synthesis = synthesis_options(mode, 16, proposal, space)
    known = proposal_communicators(proposal)
    compute, tight, predicted, planning, synthesised = [], [], [], [], 0
    for batch in batches:
        plan = plan_step(proposal, batch, synthesis=synthesis, known=known)
        known |= strategy_communicators(plan.strategy(proposal))
        bound = step_bound(batch, pool, proposal.devices, proposal.pipeline_model.p2p_ms)
        compute.append(_compute_part(plan, proposal) / bound.pool_ms)
        tight.append(plan.predicted_ms / bound.tight_ms)
        predicted.append(plan.predicted_ms)
        planning.append(plan.planning_ms)
        synthesised += plan.synthesis is not None
    schemes = [g.scheme for g in menu(proposal, synthesis.schemes)]
    bound = communicator_bound(schemes, proposal.devices)
    return [mode if mode != Synthesise.OFF.value else "off", np.median(compute), np.percentile(compute, 90),
            np.median(tight), np.mean(predicted), f"{synthesised}/{len(batches)}", np.median(planning),
            np.percentile(planning, 90), len(known), bound]


def _compute_part(plan, proposal) -> float:
    """``max_p (Σ_j t_j + (pp − 1)·max_j t_j)`` from the plan's pipelines and micro-batches."""
    worst = 0.0
    for group, pipeline in zip(plan.strategy(proposal).expanded(), plan.pipelines):
        times = [microbatch_time_ms(group.time, mb.lengths) for mb in pipeline.micro_batches]
        if times:
            worst = max(worst, sum(times) + (group.scheme.pp - 1) * max(times))
    return worst


if __name__ == "__main__":
    main()
