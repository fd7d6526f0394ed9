"""``hydraulis profile``: measure the schemes that fit the local devices and write a scheme space."""

from __future__ import annotations

import argparse

from hydraulis import __version__
from hydraulis.artifacts import timestamp, write_scheme_space
from hydraulis.base import limits
from hydraulis.base.errors import require
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import SchemeSpace
from hydraulis.cli.arguments import Bounded, BoundedList, OutputPath
from hydraulis.cli.output import (
    OPTIONS_HELP,
    add_variants_argument,
    command_line,
    emit,
    options_cell,
    plural,
    scheme_variants,
    table,
)
from hydraulis.io.profile_run import (
    ProfileOutcome,
    ProfileRequest,
    SegmentProfileOutcome,
    profile_scheme_space,
    profile_segment_space,
)
from hydraulis.planner.config import Variants
from hydraulis.profiler.measurement import Clock
from hydraulis.profiler.sweep import Interleave, Statistic, SweepConfig, parse_token_counts
from hydraulis.sharding.kinds import DeviceKind

PRESET_OF_DEVICE = {DeviceKind.CPU: "cpu", DeviceKind.CUDA: "h100-80g"}


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "profile", help="measure schemes on the local devices and fit a scheme space",
        description="Measure forward + backward of one pipeline stage of every (cp, tp, pp) scheme that fits "
                    "the local devices, with the runtime's own parallel layers, on packed micro-batches of "
                    "several token counts and length mixes; fit a, b, c >= 0 and the activation memory; "
                    "write a measured scheme space. Also measures the runtime's step without compute "
                    "(propagate, reduce, update) on all local devices and fits the space's reduce_gbps to it, "
                    "and the time to create and first use a communicator (the space's communicator_ms). "
                    "Finished points are cached (--cache), so a killed sweep resumes where it stopped. "
                    "See hydraulis.profiler.",
        epilog="Processes talk over gloo on CPU and NCCL on CUDA. On CPU each point runs, by default, on "
               "replicas that fill the node, as training loads it, and every scheme is measured in the same "
               "rounds, so the machine's drift does not set schemes apart (--fill-node, --interleave). Prints "
               "per scheme R², the held-out median and max relative error and the representative block's "
               "extrapolation error. examples/profile_all_parallel_schemes.sh wraps this command.")
    parser.add_argument("--model", required=True, help="model preset, e.g. tiny or llama-7b")
    parser.add_argument("--layers", type=Bounded(limits.LAYERS),
                        help="override the preset's layer count (e.g. 4 for a quick look)")
    parser.add_argument("--cp", type=BoundedList(limits.PARALLEL_DEGREE), default=(1, 2),
                        help="cp degrees (default 1,2)")
    parser.add_argument("--tp", type=BoundedList(limits.PARALLEL_DEGREE), default=(1, 2, 4),
                        help="tp degrees (default 1,2,4)")
    parser.add_argument("--pp", type=BoundedList(limits.PARALLEL_DEGREE), default=(1, 2),
                        help="pp degrees (default 1,2)")
    parser.add_argument("--options", action="append", metavar="OPTIONS", help=OPTIONS_HELP)
    add_variants_argument(parser, Variants.NONE,
                          "all: measure the repeated decoder layer once per (cp, tp, sp, recompute mode) and the "
                          "stage ends once per (cp, tp, sp), each stage alone, and compose every scheme and variant "
                          "from them (a space with segments); whole stages of every scheme are measured too, held "
                          "out, and the composition's error and the profiling time saved are printed. none: one "
                          "pipeline stage per scheme and --options")
    parser.add_argument("--seq-lens", required=True,
                        help="micro-batch token counts: a list 64,128,256 or a range 64:1024 (doubling) or "
                             "128:1024:128 (stepped); each is measured as several length mixes")
    parser.add_argument("--device", choices=[k.value for k in DeviceKind], default=DeviceKind.AUTO.value,
                        help="auto (CUDA when present), cpu or cuda (default auto)")
    parser.add_argument("--max-procs", type=Bounded(limits.PROCESSES),
                        help="most processes (devices) a scheme may use (default and limit: the GPUs, or 2 per "
                             "CPU core)")
    parser.add_argument("--threads", type=Bounded(limits.THREADS), default=1,
                        help="intra-op threads per process (default 1)")
    parser.add_argument("--fill-node", action=argparse.BooleanOptionalAction, default=None,
                        help="run every point on as many replicas of its scheme as fill the local devices, as a "
                             "training step that fills the node loads it (default: on for CPU, where a device is "
                             "a process sharing the cores, off for CUDA; see hydraulis.runtime.profiling.device)")
    parser.add_argument("--clock", choices=[c.value for c in Clock],
                        help="wall: elapsed time; cpu: each rank's busy time (default wall, but cpu on CPU with "
                             "--no-fill-node; see hydraulis.runtime.profiling.device)")
    parser.add_argument("--repeats", type=Bounded(limits.REPEATS), default=3,
                        help="timed runs per point (default 3); each run times its micro-batches one by one")
    parser.add_argument("--statistic", choices=[s.value for s in Statistic], default=Statistic.MIN.value,
                        help="a point's time from its timed micro-batches: min (default; other work on a shared "
                             "machine only ever adds time) or median (how caches written before the choice existed "
                             "were measured)")
    parser.add_argument("--interleave", choices=[i.value for i in Interleave],
                        help="which points share the measuring rounds: scheme (each scheme's apart; a killed "
                             "sweep loses at most one scheme) or sweep (every scheme together, so a machine whose "
                             "speed drifts does not set schemes apart) (default sweep on CPU, scheme on CUDA; see "
                             "hydraulis.runtime.profiling.device)")
    parser.add_argument("--warmup", type=Bounded(limits.WARMUP), default=1,
                        help="discarded runs per point; the first also sets the micro-batches per run (default 1)")
    parser.add_argument("--block-layers", type=Bounded(limits.LAYERS), default=1,
                        help="layers K of the representative block: stages of K and 2K layers are measured and "
                             "extrapolated to the stage; a stage of at most 2K layers is measured whole (default 1)")
    parser.add_argument("--check-full-stage", action="store_true",
                        help="also measure the full stage where it is extrapolated, and report the error")
    parser.add_argument("--device-preset",
                        help="preset for what is not measured: runtime overhead, safety margin, latency, bandwidth "
                             "(default cpu, or h100-80g on CUDA)")
    parser.add_argument("--cache", type=OutputPath(),
                        help="folder of the measurement cache (default: none, measure everything)")
    parser.add_argument("-o", "--output", required=True, type=OutputPath(), help="scheme-space JSON to write")
    parser.set_defaults(run=_profile)


def _profile(args: argparse.Namespace) -> None:
    model = model_preset(args.model, args.layers)
    token_counts = parse_token_counts(args.seq_lens)
    require(len(token_counts) >= 2, "seq_lens", args.seq_lens,
            "must name at least 2 token counts (to tell the fixed cost c from b)")

    from hydraulis.runtime.profiling.device import default_interleave, local_devices
    from hydraulis.runtime.profiling.measure import run_measure_job

    variants = Variants(args.variants)
    require(variants is Variants.NONE or not (args.options or args.check_full_stage), "--variants", args.variants,
            "measures every option and holds whole stages out itself: leave out --options and --check-full-stage")
    local = local_devices(DeviceKind(args.device), args.max_procs, args.threads,
                          Clock(args.clock) if args.clock else None, args.fill_node)
    sweep = SweepConfig(model, args.cp, args.tp, args.pp, token_counts, local.environment.devices, args.repeats,
                        args.warmup, args.block_layers, args.check_full_stage, scheme_variants(args.options),
                        Statistic(args.statistic),
                        Interleave(args.interleave) if args.interleave else default_interleave(local.kind))
    device = device_preset(args.device_preset or PRESET_OF_DEVICE[local.kind])
    request = ProfileRequest(sweep, local.environment, device, args.cache, timestamp(), __version__, command_line())
    runner = lambda job, n: run_measure_job(job, n, local.options, args.log_level)  # noqa: E731
    if variants is Variants.ALL:
        segmented = profile_segment_space(request, runner)
        write_scheme_space(args.output, segmented.space)
        _print_segments(segmented, sweep.statistic)
    else:
        outcome = profile_scheme_space(request, runner)
        write_scheme_space(args.output, outcome.space)
        _print(outcome)
    emit(f"wrote {args.output}")


def _print(outcome: ProfileOutcome) -> None:
    space = outcome.space
    _heading(space, "", plural(len(outcome.fits), 'scheme'), outcome.reused, outcome.measured, outcome.wall_s)
    reduction = outcome.reduction
    if reduction:
        emit(f"reduction on {reduction.devices} devices ({reduction.devices}×(1,1,1), ZeRO-1): "
             f"{reduction.time_ms:.1f} ms per step (propagate {reduction.propagate_ms:.1f}, reduce and update "
             f"{reduction.reduce_ms:.1f}) → reduce_gbps {space.reduce_gbps:.4g}; a new communicator "
             f"{space.communicator_ms:.1f} ms")
    for skipped in outcome.skipped:
        emit(f"skipped {skipped.scheme}: {skipped.reason}")
    for limit in outcome.capacity_limits:
        emit(f"capacity limit {limit.scheme}: out of memory at {limit.tokens} tokens (stage of {limit.depth} layers)")
    headers = ("cp", "tp", "pp", "options", "L_s", "a", "b", "c", "R2", "held-out med", "held-out max", "fit/held",
               "extrap. med", "extrap. max", "act. B/token", "fwd share")
    rows = []
    for fit in outcome.fits:
        extra = fit.extrapolation
        rows.append([fit.scheme.cp, fit.scheme.tp, fit.scheme.pp, options_cell(fit.scheme.options), fit.stage_layers, fit.time.a, fit.time.b, fit.time.c,
                     fit.quality.r2, _percent(fit.quality.median_rel_error), _percent(fit.quality.max_rel_error),
                     f"{fit.fitted_points}/{fit.quality.points}",
                     _percent(extra.median_rel_error) if extra else "-", _percent(extra.max_rel_error) if extra else "-",
                     round(fit.activation_bytes_per_token), round(fit.forward_fraction, 3)])
    emit(table(headers, rows))


def _print_segments(outcome: SegmentProfileOutcome, statistic: Statistic) -> None:
    space = outcome.space
    _heading(space, " with variants", f"{len(space.segments)} segments (cp, tp, sp) for "
             f"{plural(len(space.profiles), 'scheme')}", outcome.reused, outcome.measured, outcome.wall_s)
    if outcome.reduction:
        emit(f"reduction on {outcome.reduction.devices} devices: {outcome.reduction.time_ms:.1f} ms per step → "
             f"reduce_gbps {space.reduce_gbps:.4g}; a new communicator {space.communicator_ms:.1f} ms")
    for skipped in outcome.skipped:
        emit(f"skipped {skipped.scheme}: {skipped.reason}")
    rows = [[s.cp, s.tp, "sp" if s.sp else "-", *(f"{block.time.b:.4g}/{block.kept_bytes_per_token:.0f}"
                                                  for block in (s.layer, s.selective, s.full))]
            for s in space.segments]
    emit("one decoder layer per (cp, tp, sp): b (ms per token) / kept bytes per token")
    emit(table(("cp", "tp", "sp", "none", "selective", "full"), rows))
    emit("composed stages against whole stages measured alone, held out of the fit (plain and recomputing about half "
         f"the layers of each stage in full; a point's time is the {statistic.value} of its micro-batches' times):")
    rows = [[e.scheme.cp, e.scheme.tp, e.scheme.pp, options_cell(e.scheme.options), e.points, round(e.r2, 4),
             _percent(e.median_rel_error), _percent(e.max_rel_error)] for e in outcome.held_out]
    emit(table(("cp", "tp", "pp", "options", "points", "R2", "held-out med", "held-out max"), rows))
    emit(f"held-out composed-stage error: median over schemes {_percent(outcome.median_error)}, "
         f"worst scheme median {_percent(outcome.worst_error)}")
    cost = outcome.time
    emit(f"profiling time: {cost.segment_points} segment points took {cost.segment_wall_s:.1f} s; measuring every "
         f"scheme × variant as whole stages would take {cost.whole_stage_points} points ≈ "
         f"{cost.whole_stage_wall_s:.1f} s (at {cost.whole_stage_point_s:.2f} s per held-out whole-stage point): "
         f"saved ≈ {cost.saved_s:.1f} s ({cost.whole_stage_wall_s / max(cost.segment_wall_s, 1e-9):.1f}×)")


def _heading(space: SchemeSpace, how: str, what: str, reused: int, measured: int, wall_s: float) -> None:
    emit(f"profiled {space.model.name} ({space.model.layers} layers){how} on {space.provenance.device}, "
         f"{space.provenance.software}")
    emit(f"{what}, {plural(reused + measured, 'point')}: reused {reused} from the cache, measured {measured}, "
         f"in {wall_s:.1f} s")


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"
