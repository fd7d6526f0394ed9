"""Dispatch planning latency and plan quality, per batching method, on the example proposals.

For each case, ``--steps`` steps are sampled from the lengths file (token budget from the
proposal: 200K tokens for 7B, 1.6M for 32B; pieces of at most 32K), each is dispatched with
all four batching methods, and the table shows the predicted step time, its ratio to the plan's
lower bound and to design §6's work bound, and the planning time (median and p90, measured
inside ``dispatch`` with ``time.perf_counter``; one warm-up call first).

    python benchmarks/dispatch_latency.py [--steps 100] [--ilp-nodes 0] [--cases 7b_32dev,7b_64dev,32b_1024dev]
"""
from __future__ import annotations

import argparse
import os
import platform

from hydraulis.artifacts import read_lengths, read_proposal
from hydraulis.base.workload import sample_batches
from hydraulis.cli.output import table
from hydraulis.dispatch import DispatchOptions, compare_methods, dispatch

MAX_SEQ_LEN = 32_768


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--ilp-nodes", type=int, default=0, help="ILP branch-and-bound nodes per pipeline (0: none)")
    parser.add_argument("--lengths", default="examples/data/longtail.txt")
    parser.add_argument("--cases", default="7b_32dev,7b_64dev,32b_1024dev")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    lengths = read_lengths(args.lengths)
    options = DispatchOptions(ilp_nodes=args.ilp_nodes)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"{args.steps} steps per case, ILP budget {args.ilp_nodes} nodes")
    for case in args.cases.split(","):
        proposal = read_proposal(f"examples/proposals/{case}.json")
        batches = sample_batches(lengths, proposal.token_budget, args.steps, MAX_SEQ_LEN, seed=args.seed)
        dispatch(proposal, batches[0], options=options)
        summaries = compare_methods(proposal, batches, options)
        pieces = sorted(b.size for b in batches)[len(batches) // 2]
        print(f"\n{case}: {proposal.devices} devices, {len(proposal.strategies)} strategies, "
              f"{proposal.token_budget} tokens per step (median {pieces} sequences)")
        print(table(("method", "mean_ms", "median_ms", "ratio_median", "ratio_p90", "work_ratio_median",
                     "plan_ms_median", "plan_ms_p90"),
                    [[s.method.value, s.mean_ms, s.median_ms, s.median_ratio, s.p90_ratio, s.median_work_ratio,
                      s.planning_median_ms, s.planning_p90_ms] for s in summaries]))


if __name__ == "__main__":
    main()
