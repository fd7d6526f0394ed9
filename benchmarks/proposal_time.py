"""Proposal wall time for the acceptance settings, and the proposal against every homogeneous
strategy on the same sampled steps and cost model.

    .venv/bin/python benchmarks/proposal_time.py [--solver cbc|highs] [--repeat 3]
    .venv/bin/python benchmarks/proposal_time.py --scale [--repeat 1]

Settings: LLaMA-7B original pool (imported, A800), 32 devices, 8 per node, 32K maximum, the
bundled long-tail lengths at 64K and 128K tokens per step; LLaMA-32B analytic space (H100),
1024 devices, 1.6M tokens per step, 32K maximum. With ``--scale`` the largest jobs instead:
LLaMA-70B on 8,192 H100s, 12.8M tokens per step, and Llama 3.1 405B on 16,384 H100s, 16M
tokens per step (Llama 3's batch), both cut at 131,072 tokens, analytic spaces with every
variant (405B: cp up to 16, tp 4 and 8, pp 4 to 16 — the degrees that hold 131K). The time is
that of :func:`propose` alone (scheme space and lengths already loaded), best of ``--repeat``
runs, and the spread (fastest–slowest) of those runs: the machine may be shared, so the CPU
time of the best run is printed too, with the process's peak resident memory and the
integer programs' status and gap (fluid makespan over its proven bound, worst range). The
safety stop is raised to an hour so that the work budgets, not a loaded machine's clock,
bound the search.
"""

from __future__ import annotations

import argparse
import re
import resource
import time
from pathlib import Path

import numpy as np

from hydraulis import __version__
from hydraulis.artifacts import read_json, read_lengths
from hydraulis.artifacts.original_pool import import_original_pool, pool_shape
from hydraulis.base.presets import device_preset, model_matching, model_preset, pool_location
from hydraulis.base.types import Cluster, PipelineGroup, Proposal, SchemeSpace, Strategy
from hydraulis.base.workload import sample_batches
from hydraulis.cost import scheme_capacities
from hydraulis.planner import PlannerConfig, SolverName, propose
from hydraulis.planner.evaluate import CostContext, estimate_step
from hydraulis.planner.options import planning_space
from hydraulis.profiler.analytic import analytic_scheme_space

LENGTHS = Path(__file__).resolve().parents[1] / "examples" / "data" / "longtail.txt"
CREATED = "2026-01-01T00:00:00+00:00"
SAFETY_S = 3600.0


def reference_7b() -> SchemeSpace:
    document = read_json(pool_location("bundled:7b"))
    device = device_preset("a800-80g")
    return import_original_pool(document, model_matching(*pool_shape(document)), 64, device.name,
                                 device.inter_node_gbps, created=CREATED, tool_version=__version__,
                                 communicator_ms=device.communicator_ms)


def analytic_32b() -> SchemeSpace:
    device = device_preset("h100-80g")
    return analytic_scheme_space(model_preset("llama-32b"), device, Cluster(1024, device.devices_per_node, device.name),
                                 (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), created=CREATED, tool_version=__version__)


def analytic_scale(model: str, devices: int, cps: tuple[int, ...], tps: tuple[int, ...],
                   pps: tuple[int, ...]) -> SchemeSpace:
    device = device_preset("h100-80g")
    return analytic_scheme_space(model_preset(model), device, Cluster(devices, device.devices_per_node, device.name),
                                 cps, tps, pps, created=CREATED, tool_version=__version__, segments=True)


def scale_settings() -> list[tuple[str, SchemeSpace, PlannerConfig]]:
    """The two largest jobs of the module docstring."""
    return [
        ("llama-70b analytic, 8192 GPUs, 12.8M tokens", analytic_scale("llama-70b", 8192, (1, 2, 4, 8), (1, 2, 4, 8),
                                                                     (1, 2, 4, 8)),
         PlannerConfig(8192, 8, 12_800_000, 131_072, time_limit_s=SAFETY_S)),
        ("llama-405b analytic, 16384 GPUs, 16M tokens", analytic_scale("llama-405b", 16384, (1, 2, 4, 8, 16), (4, 8),
                                                                      (4, 8, 16)),
         PlannerConfig(16384, 8, 16_000_000, 131_072, time_limit_s=SAFETY_S)),
    ]


def fluid_gap(proposal: Proposal) -> float:
    """The worst range's fluid makespan over its proven bound, minus one (from the solver report)."""
    pairs = re.findall(r"fluid (\d+) ms ≥ (\d+) ms", proposal.solver.message)
    return max((float(hi) / float(lo) - 1.0 for hi, lo in pairs if float(lo) > 0), default=0.0)


def homogeneous_comparison(space: SchemeSpace, lengths: np.ndarray, config: PlannerConfig,
                           proposal: Proposal) -> tuple[float, float, Strategy]:
    """Mean predicted step time of the proposal (each step on the strategy serving it) and of
    the best homogeneous strategy holding the maximum length, on the planner's sampled steps."""
    space = planning_space(space, config.devices, config.devices_per_node)
    steps = sample_batches(lengths, config.token_budget, config.steps, config.max_seq_len, config.seed)
    context = CostContext(space.model.params, proposal.optimizer_layout, space.reduce_gbps, space.pipeline_model)

    def serving(step: np.ndarray) -> Strategy:
        return next(p.strategy for p in proposal.strategies if p.serves_from < step.max() <= p.serves_to)

    proposal_ms = float(np.mean([estimate_step(serving(s), s, context).step_ms for s in steps]))
    best_ms, best = np.inf, None
    for capacity in scheme_capacities(space, proposal.optimizer_layout):
        scheme = capacity.profile.scheme
        if capacity.max_seq_len < config.max_seq_len or scheme.devices > config.devices:
            continue
        strategy = Strategy((PipelineGroup(scheme, config.devices // scheme.devices, capacity.max_seq_len,
                                           capacity.profile.time),))
        mean = float(np.mean([estimate_step(strategy, s, context).step_ms for s in steps]))
        if mean < best_ms:
            best_ms, best = mean, strategy
    return proposal_ms, best_ms, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", choices=[s.value for s in SolverName], default="cbc")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", action="store_true", help="the 8,192- and 16,384-device settings instead")
    args = parser.parse_args()
    lengths = read_lengths(LENGTHS)
    settings = scale_settings() if args.scale else [
        ("llama-7b pool, 32 GPUs, 64K tokens", reference_7b(), PlannerConfig(32, 8, 65_536, 32_768)),
        ("llama-7b pool, 32 GPUs, 128K tokens", reference_7b(), PlannerConfig(32, 8, 131_072, 32_768)),
        ("llama-32b analytic, 1024 GPUs, 1.6M tokens", analytic_32b(), PlannerConfig(1024, 8, 1_600_000, 32_768)),
    ]
    header = (f"{'setting':44s} {'wall_s':>7s} {'spread_s':>13s} {'cpu_s':>7s} {'rss_MB':>6s} {'K':>2s} "
              f"{'status':>10s} {'gap':>6s} {'proposal_ms':>11s} {'homog_ms':>9s} {'ratio':>6s}  "
              f"best homogeneous / strategies")
    print(header)
    print("-" * len(header))
    for name, space, config in settings:
        config = PlannerConfig(**{**config.__dict__, "solver": SolverName(args.solver)})
        walls, cpus = [], []
        for _ in range(args.repeat):
            started, cpu = time.perf_counter(), time.process_time()
            proposal = propose(space, lengths, config)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        timing = (f"{name:44s} {min(walls):7.2f} {min(walls):6.2f}–{max(walls):6.2f} "
                  f"{cpus[walls.index(min(walls))]:7.2f} {rss_mb:6.0f} {len(proposal.strategies):2d} "
                  f"{proposal.solver.status:>10s} {fluid_gap(proposal):6.2%}")
        if args.scale:
            print(f"{timing} {'-':>11s} {'-':>9s} {'-':>6s}  (the proposal's explanation compares)")
        else:
            proposal_ms, best_ms, best = homogeneous_comparison(space, lengths, config, proposal)
            print(f"{timing} {proposal_ms:11.1f} {best_ms:9.1f} {proposal_ms / best_ms:6.3f}  {best}")
        for p in proposal.strategies:
            print(f"{'':44s}   ({p.serves_from}, {p.serves_to}]: {p.strategy}  {p.predicted_ms:.0f} ms")


if __name__ == "__main__":
    main()
