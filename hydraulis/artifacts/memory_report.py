"""The memory-report document (``hydraulis memory --format json``, ``POST /v1/memory``, the plan
explorer's memory view): one builder, so the command and the service answer the same JSON.

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "memory_report", "model": {...}, "strategy", "devices",
     "devices_per_node", "device", "optimizer_layout": {"dp", "tp", "pp"}, "tokens": [...],
     "device_memory_bytes", "capacity_bytes",
     "ranks": [{"rank", "pipeline", "stage", "weights_bytes", "grad_bytes", "optimizer_bytes",
                "route_bytes", "activation_bytes", "workspace_bytes", "exchange_bytes", "total_bytes",
                "predicted_bytes"}],
     "classes": [[rank, ...]], "max_total_bytes", "max_predicted_bytes",
     "groups": [{"name", "device", "ranks", "capacity_bytes", "max_total_bytes", "max_predicted_bytes",
                 "fits"}]}                                        (with a cluster description only)

The details: :func:`memory_report_to_dict`."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from hydraulis.artifacts.scheme_space import model_to_dict

if TYPE_CHECKING:
    from hydraulis.job.memory_report import MemoryReport, RankMemory

KIND = "memory_report"
SCHEMA_VERSION = 1


def memory_report_to_dict(report: MemoryReport) -> dict:
    """``ranks[r]`` is rank ``r`` (``pipeline`` and ``stage`` null when the strategy leaves it idle),
    ``total_bytes`` its states, route and workspaces plus the larger of its activations and its
    exchange buffers (:mod:`hydraulis.sharding.step_memory`), ``predicted_bytes`` the cost model's;
    ``tokens[p]`` the micro-batch tokens of pipeline ``p``; ``classes`` the ranks that build the
    same objects (:mod:`hydraulis.runtime.memory.report`), in order of their first rank;
    ``communicator_bytes`` the communicators' buffers, outside the allocator;
    ``capacity_bytes`` what the device leaves to the allocator's tensors (its memory less what the
    process holds outside the allocator — the most connected rank's communicators among it — and
    the allocator's fragmentation, which neither total counts); ``groups`` (with
    ``--cluster``) the ranks judged on each device group's device and whether the largest fits it.

    Worked example: ``hydraulis memory --model llama-7b --strategy 1,8,1x8 --devices 64 --format json``
    has 64 ``ranks``, one class per tp rank (8 ``classes`` of 8 ranks) and ``capacity_bytes`` =
    80 GiB − overhead − margin of the ``h100-80g`` preset.
    """
    config = report.config
    document = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "model": model_to_dict(config.model),
        "strategy": config.strategy,
        "devices": config.devices,
        "devices_per_node": config.devices_per_node,
        "device": config.device,
        "optimizer_layout": asdict(config.layout),
        "tokens": list(report.tokens),
        "device_memory_bytes": report.device_memory_bytes,
        "capacity_bytes": report.capacity_bytes,
        "ranks": [_rank_to_dict(rank) for rank in report.ranks],
        "classes": [list(members) for members in report.classes],
        "max_total_bytes": report.max_total_bytes,
        "max_predicted_bytes": report.max_predicted_bytes,
    }
    if report.groups:
        document["groups"] = [{"name": g.name, "device": g.device, "ranks": list(g.ranks),
                               "capacity_bytes": g.capacity_bytes, "max_total_bytes": g.max_total_bytes,
                               "max_predicted_bytes": g.max_predicted_bytes, "fits": g.fits} for g in report.groups]
    return document


def _rank_to_dict(rank: RankMemory) -> dict:
    return {"rank": rank.rank, "pipeline": rank.pipeline, "stage": rank.stage, "weights_bytes": rank.weights_bytes,
            "grad_bytes": rank.grad_bytes, "optimizer_bytes": rank.optimizer_bytes, "route_bytes": rank.route_bytes,
            "activation_bytes": rank.activation_bytes, "workspace_bytes": rank.workspace_bytes,
            "exchange_bytes": rank.exchange_bytes, "communicator_bytes": rank.communicator_bytes,
            "total_bytes": rank.total_bytes,
            "predicted_bytes": round(rank.predicted.total)}
