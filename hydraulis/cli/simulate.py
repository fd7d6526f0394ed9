"""``hydraulis simulate``: propose once, plan every step with Hydraulis and the baselines, and
report step times, plan quality, planning latency and Hydraulis' speed-up over each baseline."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from hydraulis import __version__
from hydraulis.artifacts import timestamp
from hydraulis.artifacts.simulation import write_simulation
from hydraulis.base import limits
from hydraulis.base.directories import staged_directory
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_names, model_names
from hydraulis.cli.analyze import DEFAULT_CACHE
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath
from hydraulis.cli.output import add_variants_argument, command_line, emit, plural, table
from hydraulis.cli.simulate_cluster import simulate_cluster
from hydraulis.cli.synthesis_args import add_synthesis_arguments
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import Synthesise
from hydraulis.io.simulation_inputs import scheme_space_for, workload_lengths
from hydraulis.planner import PlannerConfig, SolverName, Variants
from hydraulis.simulation import (
    Contender,
    ContenderSummary,
    Simulation,
    SimulationConfig,
    gap_summary,
    simulate,
    summarise,
)

DEFAULT_MODEL = "llama-32b"
DEFAULT_DEVICE = "h100-80g"
DEFAULT_SYNTHETIC_DOCS = 100_000


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "simulate", help="simulate training at scale: Hydraulis against homogeneous and static baselines",
        description="Propose strategies once, then plan every simulated step with every batching method on the "
                    "proposal and with the baselines (best homogeneous strategy with padding, fixed packing "
                    "(Megatron-LM style) and balanced packing; the best single proposal strategy, static), all on "
                    "the same cost model. Prints a summary and Hydraulis' speed-up over each; writes "
                    "simulation.json, steps.csv, summary.csv, the proposals and plots into the output directory.",
        epilog="The summary gives per contender the step time, its ratio to the lower bounds and the planning "
               "latency; then the steps synthesised, the distinct communicators against their bound, and "
               "Hydraulis against the pool and tight bounds with its gap term by term. With --cluster (a mixed "
               "cluster, design §6.7) it prints the mean step and its ratio to the lower bound of each "
               "contender and writes mixed_simulation.json; paper_exp/mixed/run.py regenerates the "
               "16 A100 + 16 H100 table. examples/test_planner.sh runs LLaMA-32B on 1024 H100s.")
    parser.add_argument("--cluster", type=InputFile(FileKind.CLUSTER),
                        help="cluster description JSON of several device types (examples/clusters/a100_h100.json): "
                             "compare the mixed planner, type-segregated pipelines, FlashFlex-style cross-type "
                             "pipelines with fixed packing and the best homogeneous strategy on the fastest type "
                             "(--devices, --strategies, --solver, --variants and synthesis do not apply; default "
                             "model llama-13b); writes mixed_simulation.json")
    parser.add_argument("--cluster-evaluations", type=Bounded(limits.SEARCH_EVALUATIONS), default=400,
                        help="with --cluster: strategies each planner judges (default 400)")
    parser.add_argument("--devices", type=Bounded(limits.DEVICES), default=1024, help="devices N (default 1024)")
    parser.add_argument("--devices-per-node", type=Bounded(limits.DEVICES_PER_NODE), help="default: the scheme space's")
    parser.add_argument("--model", choices=model_names(),
                        help=f"model preset of an analytic space (default {DEFAULT_MODEL})")
    parser.add_argument("--device", choices=device_names(),
                        help=f"device preset of an analytic space (default {DEFAULT_DEVICE})")
    parser.add_argument("--space", type=InputFile(FileKind.SCHEME_SPACE),
                        help="scheme-space JSON, or bundled:7b / bundled:13b (measured A800 pools, "
                             "imported for --devices); default: analytic for --model and --device")
    parser.add_argument("--token-budget", type=Bounded(limits.TOKEN_BUDGET), default=1_600_000,
                        help="tokens per step T (default 1600000)")
    parser.add_argument("--max-seq-len", type=Bounded(limits.MAX_SEQ_LEN), default=32_768,
                        help="longest sequence S (default 32768)")
    workload = parser.add_mutually_exclusive_group()
    workload.add_argument("--lengths", type=InputFile(FileKind.LENGTHS),
                          help="document lengths file (.txt, .txt.gz, .npy)")
    workload.add_argument("--corpus", type=InputFile(FileKind.CORPUS),
                          help="corpus to tokenize offline (JSONL, Parquet, text, directory)")
    workload.add_argument("--synthetic-docs", type=Bounded(limits.LENGTHS), default=DEFAULT_SYNTHETIC_DOCS,
                          help=f"documents of the synthetic long tail (hydraulis data synth defaults) when "
                               f"neither --lengths nor --corpus is given (default {DEFAULT_SYNTHETIC_DOCS})")
    parser.add_argument("--steps", type=Bounded(limits.SAMPLED_STEPS), default=100,
                        help="simulated steps (default 100)")
    parser.add_argument("--seed", type=Bounded(limits.SEED), default=0,
                        help="planner and synthetic seed; simulated steps use seed + 1 (default 0)")
    parser.add_argument("--strategies", type=Bounded(limits.STRATEGIES), default=8,
                        help="most strategies proposed, K (default 8)")
    parser.add_argument("--time-limit", type=Bounded(limits.TIME_LIMIT_S), default=PlannerConfig.time_limit_s,
                        help="safety stop of the planner's searches, seconds; the planner's budgets are its "
                             f"defaults (hydraulis propose) (default {PlannerConfig.time_limit_s:g})")
    parser.add_argument("--solver", choices=[s.value for s in SolverName], default=SolverName.CBC.value)
    parser.add_argument("--loss-chunk-tokens", type=Bounded(limits.LOSS_CHUNK_TOKENS),
                        default=PlannerConfig.loss_chunk_tokens, metavar="TOKENS",
                        help="the runtime's loss over the vocabulary in chunks of this many tokens, as train runs it: the memory "
                             f"the plans are priced with (default {PlannerConfig.loss_chunk_tokens}, train's; 0: all at once, "
                             "[T x V] fp32 logits; train refuses a proposal priced with less)")
    parser.add_argument("--planner-steps", type=Bounded(limits.PLANNER_STEPS), default=64,
                        help="steps the planner samples (default 64)")
    add_variants_argument(parser, Variants.ALL,
                          "scheme variants the planner and the baselines may use (hydraulis propose --variants); "
                          "all: an analytic space gets segments to compose them from")
    add_synthesis_arguments(parser)
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-o", "--output", required=True, type=OutputPath(),
                        help="output directory, replaced whole once complete (a folder holding other files "
                             "is written in place); .hydraulis-complete.json lists the files")
    parser.set_defaults(run=_simulate)


def _simulate(args: argparse.Namespace) -> None:
    if args.cluster is not None:
        simulate_cluster(args)
        return
    started = time.perf_counter()
    if args.space is not None:
        for flag, value in (("--model", args.model), ("--device", args.device)):
            if value is not None:
                raise HydraulisError(flag, value, "describes an analytic space; leave it out with --space")
    variants = Variants(args.variants)
    space, space_facts = scheme_space_for(args.space, args.model or DEFAULT_MODEL, args.device or DEFAULT_DEVICE,
                                          args.devices, args.devices_per_node, command_line(),
                                          segments=variants is Variants.ALL)
    config = SimulationConfig(
        planner=PlannerConfig(
            devices=args.devices, devices_per_node=args.devices_per_node or space.cluster.devices_per_node,
            token_budget=args.token_budget, max_seq_len=args.max_seq_len, strategies=args.strategies,
            steps=args.planner_steps, seed=args.seed, solver=SolverName(args.solver), time_limit_s=args.time_limit,
            variants=variants, loss_chunk_tokens=args.loss_chunk_tokens),
        steps=args.steps, dispatch=DispatchOptions(seed=args.seed), synthesis=Synthesise(args.synthesise),
        synthesis_evaluations=args.synthesis_evaluations)
    lengths, workload_facts = workload_lengths(args.lengths, args.corpus, args.synthetic_docs, args.seed, DEFAULT_CACHE)
    simulation = simulate(space, lengths, config, progress=not args.no_progress)
    summaries = summarise(simulation)
    resolved = {**config.to_dict(), "space": space_facts, "workload": workload_facts}
    with staged_directory(args.output) as folder:
        files = write_simulation(folder, simulation, summaries, resolved, created=timestamp(),
                                 tool_version=__version__, command=command_line())
        written = [files.document, files.steps, files.summary]
        if not args.no_plots:
            from hydraulis.viz.simulation import draw_simulation

            written += draw_simulation(simulation, summaries, folder)
        written = [Path(args.output) / path.relative_to(folder) for path in written]
    emit(report(simulation, summaries))
    emit(f"wrote {', '.join(str(p) for p in written)} and {plural(len(files.proposals), 'proposal')} "
         f"in {time.perf_counter() - started:.1f} s wall")


def report(simulation: Simulation, summaries: tuple[ContenderSummary, ...]) -> str:
    """The summary table, the planning latency and the speed-ups, as printed by the command."""
    proposal = simulation.proposal
    hydraulis = summaries[[s.contender for s in summaries].index(Contender.HYDRAULIS)]
    lines = [
        f"{proposal.model.name} on {proposal.devices} devices, {proposal.token_budget} tokens per step, max_seq_len "
        f"{proposal.max_seq_len}, {plural(len(simulation.steps), 'simulated step')}; proposal of "
        f"{plural(len(proposal.strategies), 'strategy')} in {simulation.proposal_wall_s:.1f} s "
        f"(solver status {proposal.solver.status}, "
        f"optimizer layout {proposal.optimizer_layout})",
    ]
    lines += [f"  strategy {i}: {p.strategy}  serves ({p.serves_from}, {p.serves_to}]  ran on {plural(n, 'step')}"
              for i, (p, n) in enumerate(zip(proposal.strategies, hydraulis.figures.chosen))]
    lines.append("ratio = predicted / the plan's lower bound; work ratio = predicted / design §6 work bound; "
                 "speedup = Hydraulis' over the contender (ratio of mean step times)")
    lines.append(table(("contender", "strategy", "mean_ms", "median_ms", "ratio_med", "ratio_p90", "work_ratio_med",
                        "plan_ms_med", "plan_ms_p90", "speedup"),
                       [[s.contender.value, s.strategy, round(f.mean_ms, 1), round(f.median_ms, 1),
                         round(f.median_ratio, 3), round(f.p90_ratio, 3), round(f.median_work_ratio, 3),
                         round(f.planning_median_ms, 2), round(f.planning_p90_ms, 2), round(s.speedup, 3)]
                        for s, f in ((s, s.figures) for s in summaries)]))
    lines.append(f"median planning latency (Hydraulis dispatch per step): {hydraulis.figures.planning_median_ms:.1f} ms "
                 f"(p90 {hydraulis.figures.planning_p90_ms:.1f} ms)")
    lines += _synthesis_lines(simulation, hydraulis)
    lines.append("mean predicted speed-up of Hydraulis over:")
    lines += [f"  {s.contender.label}: {s.speedup:.2f}×" for s in summaries if s.contender is not Contender.HYDRAULIS]
    return "\n".join(lines)


def _synthesis_lines(simulation: Simulation, hydraulis: ContenderSummary) -> list[str]:
    """Synthesis, communicators, bounds and Hydraulis' gap term by term (medians over steps)."""
    config, gap, c = simulation.config, gap_summary(simulation), simulation.communicators
    return [
        f"synthesis ({config.synthesis.value}, {config.synthesis_evaluations} evaluations per step): "
        f"{hydraulis.figures.synthesised} of {len(simulation.steps)} steps ran a strategy made for them",
        f"distinct communicators over the run: {c.run} ({c.proposal} of the proposal's strategies, warmed first); "
        f"bound of aligned placement for its schemes on {simulation.proposal.devices} devices: {c.bound}",
        f"bounds (median over steps): pool {gap.pool_ms:.1f} ms = max(work, longest sequence), tight "
        f"{gap.tight_ms:.1f} ms; Hydraulis predicted / pool {gap.predicted_over_pool:.3f}, compute part / pool "
        f"{gap.compute_over_pool:.3f}, predicted / tight {gap.predicted_over_tight:.3f}",
        "Hydraulis' gap (median ms over steps): " + ", ".join(f"{n} {v:.1f}" for n, v in gap.parts),
        f"exposed_reduction_share={gap.exposed_reduction_share:.3f} (reduction the backward cannot hide over the "
        f"step time, Hydraulis' plans, design §6.3)",
    ]
