"""How far stage 2's greedy packing is from the integer program's proven optima, on single 1F1B pipelines.

For ``p`` = 2, 4, 8 stages, ``--instances`` pipelines each receive 8–29 documents drawn from
the lengths file (≤ 8K tokens; per-stage coefficients of a 7B-like scheme divided by ``p``);
each is dispatched greedily and with the integer program (``--nodes`` branch-and-bound nodes,
the same micro-batch count as the greedy answer; ``--time-limit`` is only a safety stop).

Per ``p`` the table counts the program's statuses (hydraulis/dispatch/packing.py:
``ilp_optimal`` beat greedy and proved it, ``greedy_ilp_optimal`` proved greedy optimal,
``ilp_feasible`` / ``greedy_ilp_not_better`` were stopped by the node budget, and so on) and
compares greedy with **proven optima only**: ``greedy / optimum − 1`` over the proven instances
(mean, max). For the others it prints ``greedy / bound − 1`` where the solver proves a bound
(HiGHS, ``--solver highs``; CBC's bound does not come back through PuLP: "n/a").

    python benchmarks/stage2_vs_ilp.py [--instances 8] [--nodes 2000] [--solver cbc|highs]
"""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from hydraulis.artifacts import read_lengths
from hydraulis.base.presets import model_preset
from hydraulis.base.solver import SolverName
from hydraulis.base.types import (
    OptimizerLayout,
    PipelineGroup,
    PipelineModel,
    Proposal,
    ProposedStrategy,
    Scheme,
    SolverReport,
    Strategy,
    TimeCoefficients,
)
from hydraulis.cli.output import table
from hydraulis.dispatch import DispatchOptions, PackingStatus, dispatch


def one_pipeline(pp: int) -> Proposal:
    group = PipelineGroup(Scheme(1, 1, pp), 1, 16_000, TimeCoefficients(5e-7 / pp, 0.1 / pp, 30.0 / pp))
    strategy = Strategy((group,))
    return Proposal(model=model_preset("llama-7b"), devices=pp, devices_per_node=8,
                    optimizer_layout=OptimizerLayout(pp, 1, 1),
                    strategies=(ProposedStrategy(strategy, 0, 16_000, 0.0, 0.0, (0,)),), token_budget=16_000,
                    max_seq_len=16_000, pipeline_model=PipelineModel(), solver=SolverReport("example", "none", 0.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=2000, help="branch-and-bound nodes per program (default 2000)")
    parser.add_argument("--solver", choices=[s.value for s in SolverName], default=SolverName.CBC.value)
    parser.add_argument("--time-limit", type=float, default=600.0, help="safety stop per step, seconds (default 600)")
    parser.add_argument("--lengths", default="examples/data/longtail.txt")
    args = parser.parse_args()
    pool = read_lengths(args.lengths)
    pool = pool[pool <= 8000]
    rng = np.random.default_rng(0)
    options = DispatchOptions(ilp_nodes=args.nodes, ilp_solver=SolverName(args.solver), ilp_time_limit_s=args.time_limit)
    rows, every = [], Counter()
    for pp in (2, 4, 8):
        proposal = one_pipeline(pp)
        proven_gaps, bound_gaps, statuses = [], [], Counter()
        for _ in range(args.instances):
            lengths = rng.choice(pool, int(rng.integers(8, 30)))
            greedy = dispatch(proposal, lengths)
            solved = dispatch(proposal, lengths, options=options).pipelines[0]
            statuses[solved.solver_status] += 1
            if PackingStatus(solved.solver_status).proven:
                proven_gaps.append(greedy.predicted_ms / solved.predicted_ms - 1.0)
            elif solved.proven_ms is not None:
                bound_gaps.append(greedy.predicted_ms / solved.proven_ms - 1.0)
        every.update(statuses)
        rows.append([pp, args.instances, len(proven_gaps), _stat(np.mean, proven_gaps), _stat(np.max, proven_gaps),
                     args.instances - len(proven_gaps), _stat(np.max, bound_gaps),
                     ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))])
    print(f"greedy stage 2 vs the integer program ({args.solver}, {args.nodes} nodes per pipeline, same micro-batch "
          f"count); gaps = greedy / proven optimum − 1, bound gap = greedy / proven bound − 1 (unproven instances)")
    print(table(("pp", "pipelines", "proven", "mean_gap", "max_gap", "unproven", "max_bound_gap", "statuses"), rows))
    print("status counts: " + ", ".join(f"{s} {n}" for s, n in sorted(every.items())))


def _stat(reduce, values: list[float]) -> float | str:
    return float(reduce(values)) if values else "n/a"


if __name__ == "__main__":
    main()
