"""``hydraulis propose``: a few heterogeneous strategies for a scheme space and a lengths file."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from hydraulis.artifacts import read_lengths, read_scheme_space, write_proposal
from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_names
from hydraulis.base.types import Proposal
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath, optimizer_layout
from hydraulis.cli.output import add_variants_argument, command_line, emit, plural, table
from hydraulis.io.simulation_inputs import cluster_spaces_for
from hydraulis.planner import PlannerConfig, SolverName, Variants, propose
from hydraulis.planner.mixed_propose import MixedPlannerConfig, propose_mixed
from hydraulis.planner.report import STRATEGY_COLUMNS, proposal_heading, strategy_rows


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "propose", help="propose heterogeneous strategies for a length distribution",
        description="Propose at most K heterogeneous strategies sharing one optimizer layout, each serving the "
                    "steps whose longest sequence lies in its range, with predicted step time and memory "
                    "headroom (integer programs with PuLP, then a local search judged on sampled steps; see "
                    "hydraulis.planner). Prints a table and the wall time; the proposal keeps the resolved "
                    "config.",
        epilog="The answer depends only on the inputs, the seed and the work budgets (--solver-nodes per "
               "integer program, --search-evaluations per range); --time-limit is a safety stop, reported as "
               "solver status time_limit when it fires. In a space with segments the planner also uses each "
               "scheme's fastest variant holding each longest sequence its ranges need (--variants none: plain "
               "schemes only). --explain prints the layout, the serving ranges, the integer programs, the local "
               "search from their answers, the strategies added for steps that differ, what each strategy gains "
               "on the steps it is best on, which variant each pipeline uses and why, and the comparison with "
               "the best homogeneous strategy. With --cluster (design §7.4) it plans plain pipelines per device "
               "type and cross-type staged pipelines with per-stage tp and layer counts (CP|tp:L@group>…); "
               "plan-step dispatches with that proposal, each pipeline at its own cost. "
               "benchmarks/proposal_time.py prints proposal wall times and the comparison for LLaMA-7B on 32 "
               "GPUs and LLaMA-32B on 1024.")
    parser.add_argument("--space", type=InputFile(FileKind.SCHEME_SPACE), help="scheme-space JSON (or --cluster)")
    parser.add_argument("--devices", type=Bounded(limits.DEVICES), help="devices to plan for, N (required with --space)")
    parser.add_argument("--cluster", type=InputFile(FileKind.CLUSTER),
                        help="cluster description JSON of several device types instead of --space/--devices: plan "
                             "plain and cross-type staged pipelines (design §7.4) with a strategy per serving "
                             "range; --steps, --seed and --search-evaluations apply (default model llama-13b)")
    parser.add_argument("--model", choices=model_names(),
                        help="with --cluster: model preset of the groups' analytic spaces (default llama-13b)")
    parser.add_argument("--devices-per-node", type=Bounded(limits.DEVICES_PER_NODE), help="default: the scheme space's")
    parser.add_argument("--token-budget", type=Bounded(limits.TOKEN_BUDGET), required=True,
                        help="tokens per global batch (step)")
    parser.add_argument("--max-seq-len", type=Bounded(limits.MAX_SEQ_LEN), required=True,
                        help="longest sequence; longer documents are cut")
    parser.add_argument("--lengths", required=True, type=InputFile(FileKind.LENGTHS),
                        help="document lengths: .txt, .txt.gz or .npy, one per line")
    parser.add_argument("--strategies", type=Bounded(limits.STRATEGIES), default=8,
                        help="most strategies proposed, K (default 8)")
    parser.add_argument("--solver-nodes", type=Bounded(limits.SOLVER_NODES), default=PlannerConfig.solver_nodes,
                        metavar="N",
                        help="branch-and-bound nodes of each integer program: with --search-evaluations, the "
                             f"budgets the proposal depends on (default {PlannerConfig.solver_nodes})")
    parser.add_argument("--time-limit", type=Bounded(limits.TIME_LIMIT_S), default=PlannerConfig.time_limit_s,
                        metavar="SEC",
                        help="safety stop of all integer programs and local searches together; when it fires the "
                             "best proposal so far is written with solver status time_limit "
                             f"(default {PlannerConfig.time_limit_s:g})")
    parser.add_argument("--solver", choices=[s.value for s in SolverName], default=SolverName.CBC.value,
                        help="integer-program solver (default cbc)")
    parser.add_argument("--steps", type=Bounded(limits.PLANNER_STEPS), default=64,
                        help="steps sampled to specialise and predict (default 64)")
    parser.add_argument("--search-evaluations", type=Bounded(limits.SEARCH_EVALUATIONS),
                        default=PlannerConfig.search_evaluations,
                        help="strategies the local search may judge per range, 0: integer programs only "
                             f"(default {PlannerConfig.search_evaluations})")
    parser.add_argument("--bucket-width", type=Bounded(limits.BUCKET_WIDTH), default=128,
                        help="length histogram bucket (default 128)")
    parser.add_argument("--seed", type=Bounded(limits.SEED), default=0, help="sampling seed (default 0)")
    parser.add_argument("--optimizer-layout", metavar="DP,TP,PP", help="fix the optimizer layout (default: chosen)")
    parser.add_argument("--loss-chunk-tokens", type=Bounded(limits.LOSS_CHUNK_TOKENS),
                        default=PlannerConfig.loss_chunk_tokens, metavar="TOKENS",
                        help="the runtime's loss over the vocabulary in chunks of this many tokens, as train runs it: the memory "
                             f"the plans are priced with (default {PlannerConfig.loss_chunk_tokens}, train's; 0: all at once, "
                             "[T x V] fp32 logits; train refuses a proposal priced with less)")
    add_variants_argument(parser, Variants.ALL,
                          "none: the space's plain schemes only; all: every variant, and in a space with segments "
                          "each scheme's fastest variant (sequence parallelism, recomputing k layers per stage) for "
                          "each longest sequence the ranges may need")
    parser.add_argument("--explain", action="store_true",
                        help="print why: layout, ranges, solver, comparison, and which variant each pipeline uses")
    parser.add_argument("-o", "--output", required=True, type=OutputPath(), help="proposal JSON to write")
    parser.set_defaults(run=_propose)


def _propose(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    if args.cluster is not None:
        _propose_cluster(args, started)
        return
    for name in ("space", "devices"):
        if getattr(args, name) is None:
            raise HydraulisError(f"--{name}", None, "is required without --cluster")
    space = read_scheme_space(args.space)
    lengths = read_lengths(args.lengths)
    config = PlannerConfig(
        devices=args.devices,
        devices_per_node=args.devices_per_node or space.cluster.devices_per_node,
        token_budget=args.token_budget, max_seq_len=args.max_seq_len, strategies=args.strategies,
        bucket_width=args.bucket_width, steps=args.steps, seed=args.seed, solver=SolverName(args.solver),
        time_limit_s=args.time_limit, solver_nodes=args.solver_nodes, search_evaluations=args.search_evaluations,
        optimizer_layout=optimizer_layout(args.optimizer_layout) if args.optimizer_layout else None,
        variants=Variants(args.variants), loss_chunk_tokens=args.loss_chunk_tokens,
    )
    proposal = propose(space, lengths, config)
    write_proposal(args.output, proposal, {**config.to_dict(), "space": args.space, "lengths": args.lengths})
    _print(proposal, args.explain)
    emit(f"wrote {args.output}: {plural(len(proposal.strategies), 'strategy')} in "
         f"{time.perf_counter() - started:.2f} s "
         f"wall (planner {proposal.solver.wall_ms / 1000:.2f} s, solver status {proposal.solver.status})")


def _propose_cluster(args: argparse.Namespace, started: float) -> None:
    if args.space is not None:
        raise HydraulisError("--space", args.space, "describes a one-type cluster; leave it out with --cluster")
    spaces, facts = cluster_spaces_for(args.cluster, args.model or "llama-13b", command_line())
    config = MixedPlannerConfig(args.token_budget, args.max_seq_len, args.steps, args.seed,
                                max(1, args.search_evaluations))
    proposal = propose_mixed(spaces, read_lengths(args.lengths), config)
    write_proposal(args.output, proposal, {**asdict(config), "cluster": facts, "lengths": args.lengths})
    _print(proposal, args.explain)
    emit(f"wrote {args.output}: {plural(len(proposal.strategies), 'strategy')} for {spaces.cluster.devices} devices "
         f"of {plural(len(spaces.cluster.groups), 'device group')} in {time.perf_counter() - started:.2f} s wall")


def _print(proposal: Proposal, explain: bool) -> None:
    emit(proposal_heading(proposal))
    emit(table(STRATEGY_COLUMNS, strategy_rows(proposal.strategies)))
    if explain:
        emit("")
        emit(proposal.explanation)
        for i, proposed in enumerate(proposal.strategies):
            emit(f"strategy {i}: {proposed.explanation}")
        emit(f"solver ({proposal.solver.solver}): {proposal.solver.message}")
