"""``hydraulis space``: import, derive and inspect scheme spaces."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from hydraulis import __version__
from hydraulis.artifacts import read_json, read_scheme_space, timestamp, write_scheme_space
from hydraulis.artifacts.cluster import read_cluster
from hydraulis.artifacts.original_pool import import_original_pool, pool_shape
from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_names, device_preset, model_matching, model_names, model_preset, pool_location
from hydraulis.base.types import Cluster, ModelSpec, OptimizerLayout
from hydraulis.cli.arguments import Bounded, BoundedList, FileKind, InputFile, OutputPath, optimizer_layout
from hydraulis.cli.output import (
    OPTIONS_HELP,
    add_variants_argument,
    command_line,
    emit,
    emit_json,
    options_cell,
    plural,
    scheme_variants,
    table,
)
from hydraulis.cost.memory import memory_breakdown
from hydraulis.integrations.model_description import model_from_description
from hydraulis.planner.config import Variants
from hydraulis.planner.space_rows import space_rows
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.profiler.budget import under_budget
from hydraulis.profiler.cluster import group_scheme_space
from hydraulis.profiler.compare import compare_spaces

DEFAULT_COMPARE_LENGTHS = (128, 512, 1024, 4096, 16384)


def register(commands: argparse._SubParsersAction) -> None:
    space = commands.add_parser("space", help="import, derive and inspect scheme spaces",
                                description="Import, derive and inspect scheme spaces.")
    verbs = space.add_subparsers(dest="verb", required=True, metavar="VERB")

    imp = verbs.add_parser("import", help="convert an original Hydraulis strategy pool",
                           description="Convert a strategy pool of the original Hydraulis system "
                                       "(tp, pp, a, b, c, memory regression) into a scheme space with cp = 1.")
    imp.add_argument("pool", type=InputFile(FileKind.POOL),
                     help="pool JSON, e.g. parallel_scheme_space_7b.json, or bundled:7b / bundled:13b "
                          "for the original pools shipped with Hydraulis")
    imp.add_argument("-o", "--output", required=True, type=OutputPath(), help="scheme-space JSON to write")
    imp.add_argument("--model", choices=model_names(),
                     help="model preset (default: the preset with the pool's H and L)")
    imp.add_argument("--devices", type=Bounded(limits.DEVICES), default=64, help="cluster devices (default 64)")
    imp.add_argument("--device", default="a800-80g", choices=device_names(),
                     help="device the pool was measured on (default a800-80g)")
    imp.add_argument("--reduce-gbps", type=Bounded(limits.BANDWIDTH_GBPS),
                     help="gradient-reduction bandwidth per device, GB/s (default: the device's network)")
    imp.set_defaults(run=_import)

    ana = verbs.add_parser("analytic", help="derive a scheme space from device and model figures",
                           description="Derive a scheme space from FLOPs, achievable throughput, memory "
                                       "and link bandwidths (see hydraulis.profiler.analytic): plan for "
                                       "hardware you do not have. With --cluster, one space per device group "
                                       "of a mixed cluster (design §7.4): analytic from the group's device "
                                       "preset, or its measured space copied.")
    ana.add_argument("--model", required=True, metavar="MODEL",
                     help=f"model preset ({', '.join(model_names())}) or the path of a model description: a Hugging "
                          "Face config.json, a Megatron TransformerConfig's fields or torchtitan ModelArgs as JSON "
                          "(see hydraulis.integrations.model_description)")
    ana.add_argument("--device", choices=device_names(), help="device preset (required without --cluster)")
    ana.add_argument("--devices", type=Bounded(limits.DEVICES), help="cluster devices, e.g. 1024 (required without "
                                                                     "--cluster)")
    ana.add_argument("--cluster", type=InputFile(FileKind.CLUSTER),
                     help="cluster description JSON (examples/clusters/a100_h100.json): derive one space per device "
                          "group and write them as OUTPUT/<group>.json (a group's measured space is copied)")
    ana.add_argument("--devices-per-node", type=Bounded(limits.DEVICES_PER_NODE), help="default: the device preset's")
    ana.add_argument("--cp", type=BoundedList(limits.PARALLEL_DEGREE), default=(1, 2, 4, 8),
                     help="cp degrees (default 1,2,4,8)")
    ana.add_argument("--tp", type=BoundedList(limits.PARALLEL_DEGREE), default=(1, 2, 4, 8),
                     help="tp degrees (default 1,2,4,8)")
    ana.add_argument("--pp", type=BoundedList(limits.PARALLEL_DEGREE), default=(1, 2, 4, 8),
                     help="pp degrees (default 1,2,4,8)")
    ana.add_argument("--options", action="append", metavar="OPTIONS", help=OPTIONS_HELP)
    add_variants_argument(ana, Variants.ALL,
                          "all: also write the segments (one decoder layer per cp, tp, sp and recompute mode, the "
                          "ends of a stage) from which every variant of every scheme is composed — sequence "
                          "parallelism, recomputation of k layers per stage; none: the plain schemes (and "
                          "--options) only")
    ana.add_argument("-o", "--output", required=True, type=OutputPath(),
                     help="scheme-space JSON to write (with --cluster: a directory)")
    ana.set_defaults(run=_analytic)

    show = verbs.add_parser("show", help="one row per scheme with its longest sequence",
                            description="One row per scheme: cp, tp, pp, options (sequence parallelism, "
                                        "recomputation), devices, a, b, c, the longest sequence it can hold "
                                        "under the optimizer layout and what limits it. In a space with variants, "
                                        "each plain scheme is followed by its variants with sequence parallelism "
                                        "and with selective and full recomputation (JSON keys sp, recompute, "
                                        "recompute_layers).")
    show.add_argument("space", nargs="?", type=InputFile(FileKind.SCHEME_SPACE),
                      help="scheme-space JSON (or --cluster)")
    show.add_argument("--cluster", type=InputFile(FileKind.CLUSTER),
                      help="cluster description JSON: list its device groups, links and each group's space")
    show.add_argument("--spaces", metavar="DIR",
                      help="with --cluster: the directory space analytic --cluster wrote (default: derive "
                           "analytic spaces for groups without a measured one)")
    show.add_argument("--model", choices=model_names(), help="with --cluster and no --spaces: model preset")
    add_variants_argument(show, Variants.ALL, "none: the plain schemes only; all: also their variants")
    show.add_argument("--longest", type=Bounded(limits.MAX_SEQ_LEN), metavar="TOKENS",
                      help="also show each scheme's fastest variant holding a sequence of TOKENS tokens")
    show.add_argument("--optimizer-layout", metavar="DP,TP,PP",
                      help="optimizer layout (default: ZeRO-1 over all devices, N,1,1)")
    show.add_argument("--format", choices=("table", "json"), default="table")
    show.set_defaults(run=_show)

    budget = verbs.add_parser("budget", help="a scheme space under a device memory budget",
                              description="The space with devices of --device-memory bytes as the runtime's "
                                          "meter counts them (hydraulis train --device-memory): model states and "
                                          "activation bytes per token from the runtime's accounting, no runtime "
                                          "overhead; times unchanged (see hydraulis.profiler.budget). On a CPU, "
                                          "where nothing else limits memory, the budget then decides which "
                                          "schemes hold the longest sequences (examples/thesis.sh).")
    budget.add_argument("space", type=InputFile(FileKind.SCHEME_SPACE), help="scheme-space JSON")
    budget.add_argument("--device-memory", type=Bounded(limits.DEVICE_MEMORY), required=True, metavar="BYTES",
                        help="bytes each device (process) may hold")
    budget.add_argument("--safety-margin", type=Bounded(limits.DEVICE_MEMORY), metavar="BYTES",
                        help="bytes kept free (default: a tenth of --device-memory)")
    budget.add_argument("-o", "--output", required=True, type=OutputPath(), help="scheme-space JSON to write")
    budget.set_defaults(run=_budget)

    compare = verbs.add_parser("compare", help="relative differences of predicted micro-batch times",
                               description="Per scheme held by both spaces, the relative difference (B - A) / A "
                                           "of the predicted time of a micro-batch of one sequence, over lengths; "
                                           "e.g. a measured space (A) against the analytic one (B).")
    compare.add_argument("space_a", metavar="A", type=InputFile(FileKind.SCHEME_SPACE),
                         help="scheme-space JSON, the reference")
    compare.add_argument("space_b", metavar="B", type=InputFile(FileKind.SCHEME_SPACE),
                         help="scheme-space JSON compared with A")
    compare.add_argument("--lengths", type=BoundedList(limits.LENGTH), default=DEFAULT_COMPARE_LENGTHS,
                         help="sequence lengths (default " + ",".join(map(str, DEFAULT_COMPARE_LENGTHS)) + ")")
    compare.add_argument("--format", choices=("table", "json"), default="table")
    compare.set_defaults(run=_compare)


def _import(args: argparse.Namespace) -> None:
    document = read_json(pool_location(args.pool))
    hidden, layers, vocab = pool_shape(document)
    model = replace(model_preset(args.model), vocab=vocab) if args.model else model_matching(hidden, layers, vocab)
    device = device_preset(args.device)
    reduce_gbps = device.inter_node_gbps if args.reduce_gbps is None else args.reduce_gbps
    space = import_original_pool(document, model, args.devices, device.name, reduce_gbps,
                                  created=timestamp(), tool_version=__version__, command=command_line(),
                                  communicator_ms=device.communicator_ms)
    write_scheme_space(args.output, space)
    emit(f"wrote {args.output}: {plural(len(space.profiles), 'scheme')} of {model.name} imported from {args.pool}")


def _analytic(args: argparse.Namespace) -> None:
    if args.cluster:
        _analytic_cluster(args)
        return
    for name in ("device", "devices"):
        if getattr(args, name) is None:
            raise HydraulisError(name, None, "is required without --cluster")
    device = device_preset(args.device)
    cluster = Cluster(args.devices, args.devices_per_node or device.devices_per_node, device.name)
    model = described_model(args.model)
    space = analytic_scheme_space(model, device, cluster, args.cp, args.tp, args.pp,
                                  created=timestamp(), tool_version=__version__, command=command_line(),
                                  variants=scheme_variants(args.options),
                                  segments=Variants(args.variants) is Variants.ALL and not args.options)
    write_scheme_space(args.output, space)
    segments = f" and the segments of {len(space.segments)} (cp, tp, sp) for their variants" if space.segments else ""
    emit(f"wrote {args.output}: {plural(len(space.profiles), 'analytic scheme')} of {model.name} on "
         f"{args.devices} × {device.name}{segments}")


def described_model(text: str) -> ModelSpec:
    """A preset by name, or the model a description file gives (named after its folder or file)."""
    if text in model_names():
        return model_preset(text)
    path = Path(text)
    if not path.suffix == ".json":
        raise HydraulisError("model", text, f"is neither a preset ({', '.join(model_names())}) nor a .json description")
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return model_from_description(read_json(path), name or "model", str(path))


def _budget(args: argparse.Namespace) -> None:
    margin = args.device_memory // 10 if args.safety_margin is None else args.safety_margin
    space = under_budget(read_scheme_space(args.space), args.device_memory, margin)
    write_scheme_space(args.output, space)
    emit(f"wrote {args.output}: {plural(len(space.profiles), 'scheme')} of {space.model.name} under "
         f"{args.device_memory} bytes per device ({margin} kept free)")


def _analytic_cluster(args: argparse.Namespace) -> None:
    cluster = read_cluster(args.cluster)
    model = described_model(args.model)
    for group in cluster.groups:
        space = (read_scheme_space(group.space) if group.space else
                 group_scheme_space(group, model, timestamp(), __version__, command_line(), args.cp, args.tp, args.pp))
        if not space.model.matches(model):
            raise HydraulisError(f"groups.{group.name}.space", group.space, f"is a space of {space.model.name}, "
                                                                            f"not of {model.name}")
        path = Path(args.output) / f"{group.name}.json"
        write_scheme_space(path, space)
        emit(f"wrote {path}: {plural(len(space.profiles), 'scheme')} of {space.model.name} on {group.devices} × "
             f"{space.cluster.device} ({'measured' if group.space else 'analytic'})")


def _show_cluster(args: argparse.Namespace) -> None:
    cluster = read_cluster(args.cluster)
    if args.spaces is None and args.model is None and not all(g.space for g in cluster.groups):
        raise HydraulisError("model", None, "is required with --cluster unless --spaces or measured spaces are given")
    rows = []
    for group in cluster.groups:
        source = group.space or (str(Path(args.spaces) / f"{group.name}.json") if args.spaces else "")
        space = (read_scheme_space(source) if source else
                 group_scheme_space(group, model_preset(args.model), timestamp(), __version__))
        layout = OptimizerLayout(cluster.devices, 1, 1)
        longest = max(memory_breakdown(space.memory, space.model, p, layout).max_seq_len for p in space.profiles)
        rows.append([group.name, group.device, group.nodes, group.devices_per_node, group.devices,
                     source or "analytic", len(space.profiles), longest])
    if args.format == "json":
        emit_json({"groups": [dict(zip(_GROUP_KEYS, row)) for row in rows],
                   "links": [{"groups": [link.first, link.second], "gbps": link.gbps} for link in cluster.links]})
        return
    emit(f"{plural(len(cluster.groups), 'device group')}, {cluster.devices} devices; optimizer layout "
         f"dp{cluster.devices}·tp1·pp1")
    emit(table(("group", "device", "nodes", "per node", "devices", "space", "schemes", "longest held"), rows))
    for link in cluster.links:
        emit(f"link {link.first} – {link.second}: {link.gbps:g} GB/s")


_GROUP_KEYS = ("name", "device", "nodes", "devices_per_node", "devices", "space", "schemes", "max_seq_len")


def _show(args: argparse.Namespace) -> None:
    if args.cluster:
        _show_cluster(args)
        return
    if args.space is None:
        raise HydraulisError("space", None, "is required without --cluster")
    space = read_scheme_space(args.space)
    layout = (optimizer_layout(args.optimizer_layout) if args.optimizer_layout
              else OptimizerLayout(space.cluster.devices, 1, 1))
    rows = space_rows(space, layout, Variants(args.variants), args.longest)
    if args.format == "json":
        emit_json(rows)
        return
    emit(f"{space.model.name} on {space.cluster.devices} × {space.cluster.device} "
         f"({space.provenance.source.value}); optimizer layout {layout}")
    emit(f"pipeline: forward share φ {space.pipeline_model.forward_fraction:.3f}, hand-off d "
         f"{space.pipeline_model.p2p_ms:.3g} ms; reduction: {space.reduce_gbps:.3g} GB/s, overlap ω "
         f"{space.reduce_overlap:.2f}, communicator {space.communicator_ms:.3g} ms")
    headers = ("cp", "tp", "pp", "options", "devices", "a", "b", "c", "max_seq_len", "states_GiB", "limited by")
    emit(table(headers, [[r["cp"], r["tp"], r["pp"], options_cell(r["options"]), r["devices"], r["a"], r["b"],
                          r["c"], r["max_seq_len"], r["states_bytes"] / 2**30, r["limit"]] for r in rows]))


def _compare(args: argparse.Namespace) -> None:
    space_a, space_b = read_scheme_space(args.space_a), read_scheme_space(args.space_b)
    comparison = compare_spaces(space_a, space_b, args.lengths)
    if args.format == "json":
        emit_json([{"cp": r.scheme.cp, "tp": r.scheme.tp, "pp": r.scheme.pp, "options": list(r.scheme.options),
                    "lengths": list(r.lengths),
                    "time_a_ms": list(r.time_a_ms), "time_b_ms": list(r.time_b_ms),
                    "relative_difference": list(r.relative_differences)} for r in comparison.common])
        return
    emit(f"A: {args.space_a} ({space_a.provenance.source.value}, {space_a.provenance.device})")
    emit(f"B: {args.space_b} ({space_b.provenance.source.value}, {space_b.provenance.device})")
    emit("(B - A) / A of the predicted time of a micro-batch of one sequence of s tokens:")
    headers = ("cp", "tp", "pp", "options", *(f"s={s}" for s in args.lengths), "median |d|")
    rows = []
    for row in comparison.common:
        differences = row.relative_differences
        rows.append([row.scheme.cp, row.scheme.tp, row.scheme.pp, options_cell(row.scheme.options),
                     *(f"{100 * d:+.1f}%" for d in differences),
                     f"{100 * sorted(abs(d) for d in differences)[len(differences) // 2]:.1f}%"])
    emit(table(headers, rows))
    for name, schemes in (("A", comparison.only_a), ("B", comparison.only_b)):
        if schemes:
            emit(f"only in {name}: {' '.join(str(s) for s in schemes)}")
