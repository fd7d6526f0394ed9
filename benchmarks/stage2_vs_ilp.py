"""How far stage 2's greedy packing is from the integer program, on single 1F1B pipelines.

For ``p`` = 2, 4, 8 stages, ``--instances`` pipelines each receive 8–29 documents drawn from
the lengths file (≤ 8K tokens; per-stage coefficients of a 7B-like scheme divided by ``p``);
each is dispatched greedily and with the integer program (``--time-limit`` seconds, same
micro-batch count as the greedy answer), and the table shows ``greedy / ILP − 1``.

    python benchmarks/stage2_vs_ilp.py [--instances 8] [--time-limit 3]
"""
from __future__ import annotations

import argparse

import numpy as np

from hydraulis.artifacts import read_lengths
from hydraulis.cli.output import table
from hydraulis.dispatch import DispatchOptions, dispatch
from hydraulis.presets import model_preset
from hydraulis.types import (
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
    parser.add_argument("--time-limit", type=float, default=3.0)
    parser.add_argument("--lengths", default="examples/data/longtail.txt")
    args = parser.parse_args()
    pool = read_lengths(args.lengths)
    pool = pool[pool <= 8000]
    rng = np.random.default_rng(0)
    rows = []
    for pp in (2, 4, 8):
        proposal = one_pipeline(pp)
        gaps = []
        for _ in range(args.instances):
            lengths = rng.choice(pool, int(rng.integers(8, 30)))
            greedy = dispatch(proposal, lengths)
            solved = dispatch(proposal, lengths, options=DispatchOptions(ilp_time_limit_s=args.time_limit))
            gaps.append(greedy.predicted_ms / solved.predicted_ms - 1.0)
        rows.append([pp, args.instances, float(np.mean(gaps)), float(np.max(gaps))])
    print(f"greedy stage 2 vs integer program ({args.time_limit} s per pipeline)")
    print(table(("pp", "pipelines", "mean_gap", "max_gap"), rows))


if __name__ == "__main__":
    main()
