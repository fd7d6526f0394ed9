"""``hydraulis simulate --cluster``: the mixed-cluster comparison (design §6.7) — the mixed
planner against type-segregated pipelines, FlashFlex-style cross-type pipelines with fixed
packing and the best homogeneous strategy on the fastest device type."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from hydraulis import __version__
from hydraulis.artifacts import timestamp
from hydraulis.artifacts.mixed_simulation import write_mixed_simulation
from hydraulis.base.errors import HydraulisError
from hydraulis.cli.analyze import DEFAULT_CACHE
from hydraulis.cli.output import command_line, emit, plural, table
from hydraulis.io.simulation_inputs import cluster_spaces_for, workload_lengths
from hydraulis.planner.mixed_propose import MixedPlannerConfig
from hydraulis.simulation.mixed import MixedSimulation, MixedSimulationConfig, simulate_mixed

DEFAULT_MODEL = "llama-13b"


def simulate_cluster(args: argparse.Namespace) -> None:
    """Read the cluster and the workload, simulate, print the table, write mixed_simulation.json."""
    started = time.perf_counter()
    for flag, value in (("--space", args.space), ("--device", args.device)):
        if value is not None:
            raise HydraulisError(flag, value, "describes a one-type cluster; leave it out with --cluster")
    spaces, cluster_facts = cluster_spaces_for(args.cluster, args.model or DEFAULT_MODEL, command_line())
    config = MixedSimulationConfig(MixedPlannerConfig(args.token_budget, args.max_seq_len, args.planner_steps,
                                                      args.seed, args.cluster_evaluations), args.steps)
    lengths, workload_facts = workload_lengths(args.lengths, args.corpus, args.synthetic_docs, args.seed, DEFAULT_CACHE)
    simulation = simulate_mixed(spaces, lengths, config)
    resolved = {**asdict(config), "cluster": cluster_facts, "workload": workload_facts}
    path = write_mixed_simulation(args.output, simulation, resolved, timestamp(), __version__, command_line())
    emit(report(simulation, spaces.model.name, spaces.cluster.devices))
    emit(f"wrote {path} in {time.perf_counter() - started:.1f} s wall")


def report(simulation: MixedSimulation, model: str, devices: int) -> str:
    """The comparison table and the bound, as printed."""
    config, planner = simulation.config, simulation.config.planner
    bound = sum(simulation.bound_ms) / len(simulation.bound_ms)
    work = sum(simulation.work_ms) / len(simulation.work_ms)
    longest = sum(simulation.longest_ms) / len(simulation.longest_ms)
    lines = [f"{model} on {devices} devices of a mixed cluster, {planner.token_budget} tokens per step, max_seq_len "
             f"{planner.max_seq_len}, {plural(config.steps, 'simulated step')}; planners searched "
             f"{plural(planner.steps, 'sampled step')} in {simulation.planning_ms / 1e3:.1f} s; fastest group "
             f"{simulation.fastest_group}",
             f"lower bound (mean over steps) {bound:.1f} ms = max(work over the aggregate speed {work:.1f}, longest "
             f"sequence on its fastest pipeline {longest:.1f}); mean_ms = the dispatcher's prediction (every stage "
             f"at its pipeline's bottleneck), exact_ms = the same plans on the exact staged schedule; ratio = mean "
             f"step / mean bound",
             table(("contender", "strategy", "mean_ms", "ratio", "exact_ms", "exact_ratio"),
                   [[r.contender.value, r.strategy, round(r.mean_ms, 1), round(simulation.ratio(r), 3),
                     round(r.exact_mean_ms, 1), round(simulation.exact_ratio(r), 3)] for r in simulation.results])]
    return "\n".join(lines)
