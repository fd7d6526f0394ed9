"""``hydraulis memory``: every rank's bytes under a strategy, beside the cost model's prediction."""

from __future__ import annotations

import argparse

from hydraulis.artifacts.cluster import read_cluster
from hydraulis.artifacts.memory_report import memory_report_to_dict
from hydraulis.artifacts.scheme_space import read_scheme_space
from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_names, model_preset
from hydraulis.base.types import LOSS_CHUNK_TOKENS
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, optimizer_layout
from hydraulis.cli.output import emit, emit_json, table

GIB = 2**30


def register(commands: argparse._SubParsersAction) -> None:
    memory = commands.add_parser(
        "memory", help="per-rank memory of a strategy, from the runtime's own modules",
        description="Per rank of --strategy on --devices devices: the bytes of its weights, gradient buffers, "
                    "optimizer buffer and route (built on the meta device: nothing allocated, no process group) "
                    "and of the activations of micro-batches of --tokens tokens (the runtime's accounting), "
                    "beside the cost model's prediction for that device. Ranks that build the same objects "
                    "are computed once; the table shows one row per such class. With --cluster, every rank is "
                    "judged on its device group's device (a staged stage's @GROUP, else the first group) and "
                    "each group's largest total is set against that device's capacity.",
        epilog="A staged pipeline's stages (CP|TP:LAYERS>…) each show their own tp and layers. Llama-70B on "
               "1,024 devices takes seconds. The plan explorer (hydraulis serve) draws the same report.")
    memory.add_argument("--model", required=True, help="model preset, e.g. llama-7b")
    memory.add_argument("--strategy", required=True, metavar="SPEC", help="strategy SPEC, e.g. 1,8,1x8")
    memory.add_argument("--devices", type=Bounded(limits.DEVICES),
                        help="devices of the job, e.g. 64 (required without --cluster; with it, its devices)")
    memory.add_argument("--devices-per-node", type=Bounded(limits.DEVICES_PER_NODE), default=8, help="default 8")
    memory.add_argument("--optimizer-layout", metavar="DP,TP,PP",
                        help="optimizer layout (default: ZeRO-1 over all devices, N,1,1)")
    memory.add_argument("--tokens", type=Bounded(limits.MAX_SEQ_LEN),
                        help="tokens of a micro-batch (default: the longest sequence each scheme holds on the device)")
    memory.add_argument("--device", choices=device_names(),
                        help="device kind of the prediction and of the default --tokens (default h100-80g; with "
                             "--cluster, the first group's)")
    memory.add_argument("--cluster", type=InputFile(FileKind.CLUSTER),
                        help="cluster description JSON (examples/clusters/a100_h100.json): each rank on its "
                             "device group's device")
    memory.add_argument("--loss-chunk-tokens", type=Bounded(limits.LOSS_CHUNK_TOKENS), default=LOSS_CHUNK_TOKENS,
                        metavar="TOKENS", help=f"the runtime's loss in chunks of this many tokens (default "
                                               f"{LOSS_CHUNK_TOKENS}, train's; 0: all at once, [T x V] fp32 logits)")
    memory.add_argument("--repeat-kv", action="store_true",
                        help="count K and V repeated to the query heads, as an attention kernel without grouped-query "
                             "attention keeps them (varlen_attn without enable_gqa)")
    memory.add_argument("--space", type=InputFile(FileKind.SCHEME_SPACE),
                        help="scheme-space JSON (e.g. profiled on the device) whose activations and device memory "
                             "the prediction uses instead of the analytic space of --device")
    memory.add_argument("--format", choices=("table", "json"), default="table")
    memory.set_defaults(run=_memory)


def _memory(args: argparse.Namespace) -> None:
    from hydraulis.job.memory_report import MemoryConfig
    from hydraulis.runtime.memory.report import memory_report

    cluster = read_cluster(args.cluster) if args.cluster else None
    if args.devices is None and cluster is None:
        raise HydraulisError("--devices", None, "is required without --cluster")
    devices = args.devices if args.devices is not None else cluster.devices
    device = args.device or (cluster.groups[0].device if cluster else "h100-80g")
    config = MemoryConfig(model_preset(args.model), args.strategy, devices, device, args.devices_per_node,
                          optimizer_layout(args.optimizer_layout) if args.optimizer_layout else None, args.tokens,
                          cluster, args.loss_chunk_tokens, args.repeat_kv)
    report = memory_report(config, read_scheme_space(args.space) if args.space else None)
    if args.format == "json":
        emit_json(memory_report_to_dict(report))
        return
    where = (", ".join(f"{g.name}: {g.devices} × {g.device}" for g in cluster.groups) if cluster
             else f"{config.devices} × {config.device}")
    emit(f"{config.model.name} under {config.strategy} on {where}, optimizer layout "
         f"{config.layout}; micro-batches of {'/'.join(str(t) for t in dict.fromkeys(report.tokens))} tokens; "
         f"{len(report.classes)} rank classes")
    rows = []
    for members in report.classes:
        first = report.ranks[members[0]]
        p = first.predicted
        rows.append([_ranks(members), "-" if first.pipeline is None else first.pipeline,
                     "-" if first.stage is None else first.stage, first.weights_bytes / GIB, first.grad_bytes / GIB,
                     first.optimizer_bytes / GIB, first.route_bytes / 2**20, first.activation_bytes / GIB,
                     first.workspace_bytes / GIB, first.exchange_bytes / GIB,
                     first.total_bytes / GIB, p.states / GIB, p.total / GIB])
    emit(table(("ranks", "pipeline", "stage", "weights_GiB", "grad_GiB", "optimizer_GiB", "route_MiB",
                "activation_GiB", "workspace_GiB", "exchange_GiB", "total_GiB", "predicted_states_GiB",
                "predicted_GiB"), rows))
    for group in report.groups:
        emit(f"group {group.name} ({group.device}, ranks {_ranks(group.ranks)}): largest total with communicators "
             f"{group.max_total_bytes / GIB:.2f} GiB (predicted {group.max_predicted_bytes / GIB:.2f}) of "
             f"{group.capacity_bytes / GIB:.2f} GiB capacity: {'fits' if group.fits else 'EXCEEDS'}")
    outside = max(rank.communicator_bytes for rank in report.ranks)
    if outside:
        emit(f"communicators' buffers outside the allocator: {outside / 2**20:.0f} MiB on the most connected rank")
    emit(f"max_total_bytes={report.max_total_bytes} max_predicted_bytes={report.max_predicted_bytes}")


def _ranks(ranks: tuple[int, ...]) -> str:
    """``0-7,16-23``: runs of consecutive ranks, at most four shown."""
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:4])
    return text + (f",… ({len(ranks)})" if len(runs) > 4 else "")
