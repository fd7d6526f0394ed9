"""``hydraulis plan-step``: dispatch one global batch, or compare batching methods over sampled steps."""

from __future__ import annotations

import argparse

from hydraulis.artifacts import read_lengths, read_proposal, read_scheme_space, step_plan_to_dict, write_step_plan
from hydraulis.artifacts.assignments import assignments_lines, assignments_to_dict
from hydraulis.artifacts.samples import read_sample_steps
from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError, require_int
from hydraulis.base.solver import SolverName
from hydraulis.base.types import BatchingMethod, Proposal, StepPlan
from hydraulis.base.workload import sample_batches
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath
from hydraulis.cli.output import emit, emit_json, plural, table
from hydraulis.cli.synthesis_args import add_synthesis_arguments
from hydraulis.cost import step_bound
from hydraulis.dispatch import DispatchOptions, OversizePolicy, compare_methods, summarise_plans, work_lower_bound_ms
from hydraulis.dispatch.assigned_steps import assign_steps
from hydraulis.dispatch.gap import bound_schemes, gap_breakdown, level_compute
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions, plan_step, synthesis_options
from hydraulis.planner.options import synthesis_schemes


def register(commands: argparse._SubParsersAction) -> None:
    plan = commands.add_parser(
        "plan-step", help="plan one training step: strategy, sequences per pipeline, micro-batches",
        description="Dispatch one global batch (every length in --lengths) under a proposal: choose the "
                    "strategy, assign sequences to its pipelines, pack them into micro-batches, and print "
                    "the predicted step time against the lower bound; a strategy made for the step replaces the "
                    "proposal's when it is faster, switch included (--synthesise). With --steps N --token-budget T, "
                    "sample N steps from the lengths and compare all four batching methods instead.",
        epilog="The per-step comparison prints, per batching method (and Hydraulis with per-step synthesis), "
               "the predicted step time, its ratio to the lower bound and the planning time (median, p90). "
               "With --ilp-nodes, the integer program's status says whether it proved optimality, was stopped "
               "by the node budget or kept the greedy packing; --time-limit is only a safety stop. --gantt "
               "draws the exact 1F1B timeline.")
    plan.add_argument("--proposal", required=True, type=InputFile(FileKind.PROPOSAL), help="proposal JSON")
    plan.add_argument("--lengths", required=True, type=InputFile(FileKind.LENGTHS),
                      help="lengths file (.txt, .txt.gz, .npy): the batch, or the document pool with --steps; with "
                           "--format assignments also the user's sample ids, one step or several: id<TAB>length or "
                           "step<TAB>id<TAB>length lines (.tsv), or JSONL {\"id\", \"length\", \"step\"} (.jsonl)")
    plan.add_argument("--method", choices=[m.value for m in BatchingMethod],
                      default=BatchingMethod.DISPATCH_BALANCED_PACKING.value,
                      help="batching method (default dispatch_balanced_packing, Hydraulis)")
    plan.add_argument("--seed", type=Bounded(limits.SEED), default=0,
                      help="seed: tie order in dispatch, step sampling (default 0)")
    plan.add_argument("--ilp-nodes", type=Bounded(limits.ILP_NODES), default=0, metavar="N",
                      help="branch-and-bound nodes of the integer program for the slowest pipeline; the plan "
                           "depends only on the inputs, the seed and this budget; 0 skips it (default 0)")
    plan.add_argument("--solver", choices=[s.value for s in SolverName], default=SolverName.CBC.value,
                      help="integer-program solver (default cbc; highs also reports a stopped program's gap)")
    plan.add_argument("--time-limit", type=Bounded(limits.ILP_TIME_LIMIT_S), default=DispatchOptions.ilp_time_limit_s,
                      metavar="SEC", help="safety stop of the integer programs, reported in the plan when it fires "
                                          f"(default {DispatchOptions.ilp_time_limit_s:g})")
    plan.add_argument("--alignment", type=Bounded(limits.ALIGNMENT), default=1,
                      help="round every sequence up to a multiple of this in cu_seqlens, capacities and times "
                           "(default 1)")
    plan.add_argument("--oversize", choices=[p.value for p in OversizePolicy], default=OversizePolicy.ERROR.value,
                      help="a sequence no pipeline can hold: error (default), truncate or split")
    add_synthesis_arguments(plan)
    plan.add_argument("--space", help="scheme-space JSON the proposal was made from: the schemes of --synthesise "
                                      "space, and the pool --explain measures the gap against (default: the "
                                      "proposal's schemes)")
    plan.add_argument("--explain", action="store_true",
                      help="print the bounds (design §6's pool bound, the tight bound), the plan's gap, term by "
                           "term: strategy set, off-cheapest placement, fixed costs, imbalance, bubbles, reduction, "
                           "switch, and the least compute part of any plan at the plan's reduction level (a linear "
                           "program, design §8.2)")
    plan.add_argument("--format", choices=("table", "json", "assignments"), default="table",
                      help="table (default); json: the step plan artifact; assignments: per rank, its micro-batches "
                           "as lists of the user's sample ids (positions in --lengths without ids) with its "
                           "pipeline's scheme, stage, layers, cp rank, tp rank and predicted time, placed as the "
                           "runtime places them, and the step's strategy and predicted time (schema: "
                           "hydraulis/resources/step_assignments.schema.json); one JSON document, or JSON Lines, "
                           "one step a line, when --lengths holds several steps")
    plan.add_argument("--single-strategy", action="store_true",
                      help="with --format assignments: run every step on one strategy of the proposal (the one "
                           "predicted fastest over the steps), none synthesised, for runtimes that cannot switch "
                           "strategies between steps")
    plan.add_argument("--gantt", metavar="PNG", type=OutputPath(),
                      help="draw the 1F1B timeline of every pipeline and stage")
    plan.add_argument("-o", "--output", metavar="PLAN_JSON", type=OutputPath(), help="write the step plan")
    plan.add_argument("--steps", type=Bounded(limits.SAMPLED_STEPS),
                      help="sample this many steps and compare the batching methods")
    plan.add_argument("--token-budget", type=Bounded(limits.TOKEN_BUDGET),
                      help="tokens per sampled step (with --steps)")
    plan.add_argument("--max-seq-len", type=Bounded(limits.MAX_SEQ_LEN), help="cut sampled documents to this length "
                                                                       "(with --steps; default: the proposal's)")
    plan.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    options = DispatchOptions(seed=args.seed, ilp_nodes=args.ilp_nodes, ilp_solver=SolverName(args.solver),
                              ilp_time_limit_s=args.time_limit, alignment=args.alignment,
                              oversize=OversizePolicy(args.oversize))
    space = read_scheme_space(args.space) if args.space else None
    proposal = read_proposal(args.proposal, space)
    if args.single_strategy:
        if args.format != "assignments":
            raise HydraulisError("--single-strategy", True, "needs --format assignments")
        if args.synthesise != Synthesise.PROPOSAL.value:
            raise HydraulisError("--synthesise", args.synthesise, "makes a strategy per step: leave it out with "
                                                                 "--single-strategy")
    mode = Synthesise.OFF.value if args.single_strategy else args.synthesise
    synthesis = synthesis_options(mode, args.synthesis_evaluations, proposal, space, "--space")
    if args.format == "assignments" and args.steps is None:
        for flag, value in (("--output", args.output), ("--gantt", args.gantt), ("--explain", args.explain)):
            if value:
                raise HydraulisError(flag, value, "writes, draws or explains a step plan: use --format table or json")
        steps = assign_steps(proposal, read_sample_steps(args.lengths), BatchingMethod(args.method), options,
                             synthesis, args.single_strategy)
        if len(steps) == 1:
            emit_json(assignments_to_dict(steps[0]))
        else:
            emit(assignments_lines(steps).rstrip("\n"))
        return
    lengths = read_lengths(args.lengths)
    if args.steps is None:
        for flag, value in (("--token-budget", args.token_budget), ("--max-seq-len", args.max_seq_len)):
            if value is not None:
                raise HydraulisError(flag, value, "needs --steps")
        _one_batch(args, proposal, lengths, options, synthesis, space)
    else:
        _many_steps(args, proposal, lengths, options, synthesis)


def _one_batch(args: argparse.Namespace, proposal: Proposal, lengths, options: DispatchOptions,
               synthesis: SynthesisOptions, space) -> None:
    plan = plan_step(proposal, lengths, args.method, options, synthesis)
    if args.output:
        write_step_plan(args.output, plan)
    if args.gantt:
        from hydraulis.viz.gantt import draw_gantt

        draw_gantt(plan, proposal, args.gantt)
    if args.format == "json":
        emit_json(step_plan_to_dict(plan))
        return
    emit(_plan_header(plan, proposal, work_lower_bound_ms(proposal, lengths, options.alignment)))
    if args.explain:
        emit(_explanation(plan, proposal, space))
    rows = [[i, str(p.scheme), p.max_seq_len, sum(len(mb.sequences) for mb in p.micro_batches),
             sum(mb.tokens for mb in p.micro_batches), len(p.micro_batches), p.predicted_ms, p.solver_status]
            for i, p in enumerate(plan.pipelines)]
    emit(table(("pipeline", "scheme", "max_seq_len", "sequences", "tokens", "micro_batches", "predicted_ms",
                "status"), rows))
    for path, what in ((args.output, "step plan"), (args.gantt, "timeline")):
        if path:
            emit(f"wrote {what} {path}")


def _plan_header(plan: StepPlan, proposal: Proposal, work_bound: float) -> str:
    made = plan.synthesis
    if made:
        chosen = (f"synthesised strategy: {made.strategy} (from the {made.start}; switch {made.switch_ms:.1f} ms for "
                  f"{made.new_communicators} new communicators; best proposal strategy {made.proposal_ms:.1f} ms)")
    else:
        chosen = f"strategy {plan.strategy_index}: {plan.strategy(proposal)}"
    reduction = made.reduce_ms if made else proposal.strategies[plan.strategy_index].reduce_ms
    lines = [
        f"{chosen}   method {plan.method.value}",
        f"predicted {plan.predicted_ms:.1f} ms (reduction {reduction:.1f} ms)"
        f"   lower bound {plan.lower_bound_ms:.1f} ms (ratio {plan.predicted_ms / plan.lower_bound_ms:.3f})"
        f"   work bound {work_bound:.1f} ms (ratio {plan.predicted_ms / work_bound:.3f})"
        f"   planning {plan.planning_ms:.1f} ms",
    ]
    lines += [f"note: {note}" for note in plan.notes]
    return "\n".join(lines)


def _explanation(plan: StepPlan, proposal: Proposal, space) -> str:
    pool = bound_schemes(proposal, synthesis_schemes(space, proposal) if space else ())
    tokens = plan.pipelines.micro_batches.aligned_lengths(plan.alignment).tolist()
    bound = step_bound(tokens, pool, proposal.devices, proposal.pipeline_model.p2p_ms,
                       proposal.optimizer_layout.dp == 1)
    gap = gap_breakdown(plan, proposal, pool)
    level = level_compute(plan, proposal, pool)
    compute = max((p.predicted_ms for p in plan.pipelines), default=0.0)
    where = "the scheme space's" if space else "the proposal's"
    terms = " + ".join(f"{name} {round(ms, 1) or 0.0:.1f}" for name, ms in gap.parts())  # no "-0.0" from rounding
    return "\n".join([
        f"bounds over {where} {len(pool)} schemes: pool {bound.pool_ms:.1f} ms = max(work {bound.work_ms:.1f}, longest "
        f"sequence {bound.longest_ms:.1f}) (ratio {plan.predicted_ms / bound.pool_ms:.3f}); tight {bound.tight_ms:.1f} ms "
        f"with fixed costs, the reduction and every sequence on a scheme fast enough "
        f"(ratio {plan.predicted_ms / bound.tight_ms:.3f})",
        f"gap: predicted {gap.predicted_ms:.1f} ms = {terms}",
        f"any plan at this plan's reduction level ({level.reduce_ms:.1f} ms) computes the step in at least "
        f"{level.program_ms:.1f} ms (linear program; closed form {level.closed_ms:.1f}); this plan's compute part "
        f"{compute:.1f} ms (ratio {compute / level.program_ms:.3f})",
    ])


def _many_steps(args: argparse.Namespace, proposal: Proposal, lengths, options: DispatchOptions,
                synthesis: SynthesisOptions) -> None:
    require_int(args.steps, "--steps", minimum=1)
    if args.token_budget is None:
        raise HydraulisError("--token-budget", None, "is required with --steps")
    if args.format == "assignments":
        raise HydraulisError("--format", args.format, "lists one batch's ranks; leave out --steps")
    if args.gantt or args.output or args.explain:
        flag = "--gantt" if args.gantt else "--output" if args.output else "--explain"
        raise HydraulisError(flag, args.gantt or args.output or True,
                             "draws, writes or explains a single batch's plan; leave out --steps")
    batches = sample_batches(lengths, args.token_budget, args.steps, args.max_seq_len or proposal.max_seq_len,
                             seed=args.seed)
    summaries = list(compare_methods(proposal, batches, options))
    names = [s.method.value for s in summaries]
    if synthesis.mode is not Synthesise.OFF:
        method = BatchingMethod.DISPATCH_BALANCED_PACKING
        work = [work_lower_bound_ms(proposal, b, options.alignment) for b in batches]
        plans = [plan_step(proposal, b, method, options, synthesis) for b in batches]
        summaries.append(summarise_plans(method, plans, work, len(proposal.strategies)))
        names.append(f"{method.value}+synthesis({synthesis.mode.value})")
    if args.format == "json":
        emit_json([{"method": name, "steps": s.steps, "mean_ms": s.mean_ms, "median_ms": s.median_ms,
                    "median_ratio": s.median_ratio, "p90_ratio": s.p90_ratio,
                    "median_work_ratio": s.median_work_ratio, "planning_median_ms": s.planning_median_ms,
                    "planning_p90_ms": s.planning_p90_ms, "chosen": list(s.chosen), "synthesised": s.synthesised}
                   for name, s in zip(names, summaries)])
        return
    baseline = next(s.mean_ms for s in summaries if s.method is BatchingMethod.FIXED_PACKING)
    emit(f"{plural(args.steps, 'step')} of {args.token_budget} tokens sampled from {args.lengths} (seed {args.seed}); "
         f"ratio = predicted / lower bound, work ratio = predicted / design §6 work bound")
    emit(table(("method", "mean_ms", "median_ms", "ratio_median", "ratio_p90", "work_ratio_median",
                "speedup_vs_fixed", "plan_ms_median", "plan_ms_p90", "strategies_chosen", "synthesised"),
               [[name, s.mean_ms, s.median_ms, s.median_ratio, s.p90_ratio, s.median_work_ratio,
                 baseline / s.mean_ms, s.planning_median_ms, s.planning_p90_ms,
                 ",".join(map(str, s.chosen)), s.synthesised] for name, s in zip(names, summaries)]))
