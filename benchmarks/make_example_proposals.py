"""Write the example proposals dispatch's CLI, tests and benchmarks use (hand-chosen strategies,
not the planner's): ``examples/proposals/{7b_32dev,7b_64dev,32b_1024dev}.json``.

    python benchmarks/make_example_proposals.py [--out examples/proposals]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from hydraulis import __version__
from hydraulis.artifacts import read_json, write_proposal
from hydraulis.cost import reduce_ms, scheme_capacities
from hydraulis.presets import device_preset, model_matching, model_preset, pool_location
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.profiler.reference_pool import import_reference_pool, pool_shape
from hydraulis.types import (
    Cluster,
    OptimizerLayout,
    PipelineGroup,
    Proposal,
    ProposedStrategy,
    Scheme,
    SchemeSpace,
    SolverReport,
    Strategy,
)

CREATED = "2026-01-01T00:00:00+00:00"


def imported_7b(devices: int) -> SchemeSpace:
    document = read_json(pool_location("bundled:7b"))
    device = device_preset("a800-80g")
    return import_reference_pool(document, model_matching(*pool_shape(document)), devices, device.name,
                                 device.inter_node_gbps, created=CREATED, tool_version=__version__)


def analytic_32b(devices: int) -> SchemeSpace:
    device = device_preset("h100-80g")
    cluster = Cluster(devices, device.devices_per_node, device.name)
    return analytic_scheme_space(model_preset("llama-32b"), device, cluster, (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8),
                                 created=CREATED, tool_version=__version__)


def build_proposal(space: SchemeSpace, layout: OptimizerLayout, specs, token_budget: int, max_seq_len: int) -> Proposal:
    """``specs``: per strategy ``(serves_from, serves_to, [((cp, tp, pp), count), ...])``."""
    capacity = {c.profile.scheme: c for c in scheme_capacities(space, layout)}
    strategies = []
    for serves_from, serves_to, groups in specs:
        pipelines = tuple(
            PipelineGroup(Scheme(*scheme), count, capacity[Scheme(*scheme)].max_seq_len, capacity[Scheme(*scheme)].profile.time)
            for scheme, count in groups)
        strategy = Strategy(pipelines)
        reduction = reduce_ms(space.model.params, [g.scheme for g in strategy.expanded()], layout, space.reduce_gbps)
        strategies.append(ProposedStrategy(
            strategy=strategy, serves_from=serves_from, serves_to=serves_to, predicted_ms=0.0, reduce_ms=reduction,
            headroom_bytes=tuple(int(capacity[g.scheme].memory.headroom_bytes(g.max_seq_len)) for g in pipelines),
            explanation="hand-written example for dispatch"))
    return Proposal(model=space.model, devices=space.cluster.devices, devices_per_node=space.cluster.devices_per_node,
                    optimizer_layout=layout, strategies=tuple(strategies), token_budget=token_budget,
                    max_seq_len=max_seq_len, pipeline_model=space.pipeline_model,
                    solver=SolverReport(status="hand_written", solver="none", wall_ms=0.0))
