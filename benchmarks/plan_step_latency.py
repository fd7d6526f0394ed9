"""Planning latency of ``plan-step`` with per-step synthesis (design §8.2), per example proposal.

For each case, ``--steps`` steps are sampled from the lengths file (token budget and longest
piece from the proposal: 200K tokens for 7B, 1.6M for 32B, 32K; 12.8M and 131K for the 70B and
405B proposals the planner made at 8,192 and 16,384 devices) and planned one after the
other with ``synthesise_step`` (``--synthesise``, ``--synthesis-evaluations``), the communicators
created by earlier steps and the synthesis memory carried over as a run does; one warm-up step
first. The table shows the
median and p90 planning time (``StepPlan.planning_ms``) and how many steps synthesised.

``--dump FILE`` writes every step plan (JSON lines, ``planning_ms`` left out), so two versions
of the planner can be checked to plan identically: run each with its ``PYTHONPATH`` and compare
the files (``cmp``).

    python benchmarks/plan_step_latency.py [--steps 30] [--cases 7b_32dev,7b_64dev,32b_1024dev] [--dump plans.jsonl]
    python benchmarks/plan_step_latency.py --cases 70b_8192dev,405b_16384dev

A case is a proposal of ``examples/proposals/`` by name, or a path to a proposal JSON. The
70B and 405B proposals are the planner's (``benchmarks/proposal_time.py --scale`` settings):
``hydraulis space analytic --model llama-70b --device h100-80g --devices 8192 -o S`` then
``hydraulis propose --space S --devices 8192 --token-budget 12800000 --max-seq-len 131072
--lengths examples/data/longtail.txt``; for 405B ``--model llama-405b --devices 16384 --cp
1,2,4,8,16 --tp 4,8 --pp 4,8,16`` and ``--token-budget 16000000``. Beside the planning time
(wall clock, which a shared machine inflates) the table gives the median CPU time of the
process per step.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

from hydraulis.artifacts import read_lengths, read_proposal
from hydraulis.artifacts.step_plan import step_plan_to_dict
from hydraulis.base.types import SYNTHESIS_EVALUATIONS_DEFAULT
from hydraulis.base.workload import sample_batches
from hydraulis.cli.output import table
from hydraulis.dispatch.synthesis import (
    proposal_communicators,
    strategy_communicators,
    synthesis_options,
    synthesise_step,
)


def proposal_path(case: str) -> str:
    return case if case.endswith(".json") else f"examples/proposals/{case}.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lengths", default="examples/data/longtail.txt")
    parser.add_argument("--cases", default="7b_32dev,7b_64dev,32b_1024dev")
    parser.add_argument("--synthesise", default="proposal", choices=("off", "proposal"))
    parser.add_argument("--synthesis-evaluations", type=int, default=SYNTHESIS_EVALUATIONS_DEFAULT)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dump", default=None, help="write every step plan (without planning_ms) to this file")
    args = parser.parse_args()
    lengths = read_lengths(args.lengths)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"{args.steps} steps per case, synthesise {args.synthesise}, {args.synthesis_evaluations} evaluations")
    rows, records = [], []
    for case in args.cases.split(","):
        proposal = read_proposal(proposal_path(case))
        synthesis = synthesis_options(args.synthesise, args.synthesis_evaluations, proposal, None)
        batches = sample_batches(lengths, proposal.token_budget, args.steps + 1, proposal.max_seq_len,
                                seed=args.seed)
        known = proposal_communicators(proposal)
        _, memory = synthesise_step(proposal, batches[0], synthesis=synthesis, known=known)
        planning, cpu, synthesised = [], [], 0
        for batch in batches[1:]:
            started = time.process_time()
            plan, memory = synthesise_step(proposal, batch, synthesis=synthesis, known=known, memory=memory)
            cpu.append((time.process_time() - started) * 1e3)
            known |= strategy_communicators(plan.strategy(proposal))
            planning.append(plan.planning_ms)
            synthesised += plan.synthesis is not None
            record = step_plan_to_dict(plan)
            del record["planning_ms"]
            records.append(json.dumps({"case": case, **record}, sort_keys=True))
        rows.append([case, proposal.devices, float(np.median(planning)), float(np.percentile(planning, 90)),
                     float(np.median(cpu)), synthesised])
    print(table(("case", "devices", "plan_ms_median", "plan_ms_p90", "cpu_ms_median", "synthesised"), rows))
    if args.dump:
        with open(args.dump, "w") as out:
            out.write("\n".join(records) + "\n")


if __name__ == "__main__":
    main()
