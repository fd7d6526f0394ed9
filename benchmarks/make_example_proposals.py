"""Write the example proposals dispatch's CLI, tests and benchmarks use:
``examples/proposals/{7b_32dev,7b_64dev,32b_1024dev}.json``.

The strategies are chosen by hand (the planner is a separate part), after trying single- and
two-group strategies on sampled steps of ``examples/data/longtail.txt``: a few pipelines with
high tensor parallelism carry the 32K pieces (only tp lowers one sequence's latency; pp does
not), many cheaper pipelines carry the rest; homogeneous and pp = 2 strategies are included so
that every stage of dispatch has work. Capacities come from the memory model under ZeRO-1
over all devices (7B) or dp128·tp8 (32B); ``reduce_ms`` from the cost model;
``predicted_ms`` is the mean step time dispatch predicts for the strategy alone over 20 sampled
steps it can hold.

    python benchmarks/make_example_proposals.py [--out examples/proposals]
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from hydraulis import __version__
from hydraulis.artifacts import read_json, read_lengths, write_proposal
from hydraulis.artifacts.original_pool import import_original_pool, pool_shape
from hydraulis.base.presets import device_preset, model_matching, model_preset, pool_location
from hydraulis.base.types import (
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
from hydraulis.base.workload import sample_batches
from hydraulis.cost import exposed_reduce_ms, reduction_model, scheme_capacities
from hydraulis.dispatch import dispatch
from hydraulis.profiler.analytic import analytic_scheme_space

CREATED = "2026-01-01T00:00:00+00:00"


def imported_7b(devices: int) -> SchemeSpace:
    document = read_json(pool_location("bundled:7b"))
    device = device_preset("a800-80g")
    return import_original_pool(document, model_matching(*pool_shape(document)), devices, device.name,
                                 device.inter_node_gbps, created=CREATED, tool_version=__version__,
                                 communicator_ms=device.communicator_ms)


def analytic_32b(devices: int) -> SchemeSpace:
    device = device_preset("h100-80g")
    cluster = Cluster(devices, device.devices_per_node, device.name)
    return analytic_scheme_space(model_preset("llama-32b"), device, cluster, (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8),
                                 created=CREATED, tool_version=__version__)


def build_proposal(space: SchemeSpace, layout: OptimizerLayout, specs, token_budget: int, max_seq_len: int) -> Proposal:
    """``specs``: per strategy ``(serves_from, serves_to, [((cp, tp, pp), count), ...])``; a
    strategy serves steps up to ``min(serves_to, its longest capacity)``."""
    capacity = {c.profile.scheme: c for c in scheme_capacities(space, layout)}
    strategies = []
    for serves_from, serves_to, groups in specs:
        pipelines = tuple(
            PipelineGroup(Scheme(*scheme), count, capacity[Scheme(*scheme)].max_seq_len, capacity[Scheme(*scheme)].profile.time)
            for scheme, count in groups)
        strategy = Strategy(pipelines)
        reduction = exposed_reduce_ms(space.model.params, strategy.expanded(), layout, reduction_model(space))
        strategies.append(ProposedStrategy(
            strategy=strategy, serves_from=serves_from, serves_to=min(serves_to, strategy.max_seq_len),
            predicted_ms=0.0, reduce_ms=reduction,
            headroom_bytes=tuple(int(capacity[g.scheme].memory.headroom_bytes(g.max_seq_len)) for g in pipelines),
            explanation="hand-written example for dispatch"))
    return Proposal(model=space.model, devices=space.cluster.devices, devices_per_node=space.cluster.devices_per_node,
                    optimizer_layout=layout, strategies=tuple(strategies), token_budget=token_budget,
                    max_seq_len=max_seq_len, pipeline_model=space.pipeline_model,
                    solver=SolverReport(status="hand_written", solver="none", wall_ms=0.0),
                    reduce_gbps=space.reduce_gbps, communicator_ms=space.communicator_ms)


def _homogeneous(devices: int, scheme: tuple[int, int, int]) -> list:
    return [(scheme, devices // (scheme[0] * scheme[1] * scheme[2]))]


EXAMPLES = {
    "7b_32dev": (lambda: imported_7b(32), OptimizerLayout(32, 1, 1), 200_000, [
        _homogeneous(32, (1, 16, 1)),
        [((1, 16, 1), 1), ((1, 4, 1), 4)],
        _homogeneous(32, (1, 8, 1)),
        [((1, 8, 1), 2), ((1, 4, 1), 4)],
        [((1, 8, 1), 1), ((1, 4, 1), 6)],
        [((1, 8, 1), 1), ((1, 2, 1), 12)],
        _homogeneous(32, (1, 2, 2)),
        _homogeneous(32, (1, 4, 2)),
    ]),
    "7b_64dev": (lambda: imported_7b(64), OptimizerLayout(64, 1, 1), 200_000, [
        _homogeneous(64, (1, 16, 1)),
        [((1, 16, 1), 2), ((1, 4, 1), 8)],
        [((1, 16, 1), 1), ((1, 4, 1), 12)],
        _homogeneous(64, (1, 8, 1)),
        [((1, 8, 1), 2), ((1, 4, 1), 12)],
        [((1, 8, 1), 1), ((1, 4, 1), 14)],
        [((1, 8, 1), 1), ((1, 2, 1), 28)],
        _homogeneous(64, (1, 2, 2)),
    ]),
    "32b_1024dev": (lambda: analytic_32b(1024), OptimizerLayout(128, 8, 1), 1_600_000, [
        [((8, 8, 1), 8), ((1, 8, 1), 64)],
        [((8, 8, 1), 10), ((1, 8, 1), 48)],
        [((8, 8, 1), 6), ((2, 8, 1), 40)],
        [((8, 8, 2), 4), ((1, 8, 2), 32)],
        _homogeneous(1024, (8, 8, 1)),
        [((8, 8, 1), 8), ((2, 4, 2), 32)],
    ]),
}
MAX_SEQ_LEN = 32_768


def with_predictions(proposal: Proposal, lengths: np.ndarray) -> Proposal:
    """Each strategy's ``predicted_ms``: its mean dispatched step time over 20 sampled steps it can hold."""
    steps = sample_batches(lengths, proposal.token_budget, 20, proposal.max_seq_len, seed=0)
    strategies = []
    for proposed in proposal.strategies:
        alone = replace(proposal, strategies=(proposed,))
        times = [dispatch(alone, step).predicted_ms for step in steps if step.max() <= proposed.strategy.max_seq_len]
        strategies.append(replace(proposed, predicted_ms=float(np.mean(times)) if times else 0.0))
    return replace(proposal, strategies=tuple(strategies))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="examples/proposals")
    parser.add_argument("--lengths", default="examples/data/longtail.txt")
    args = parser.parse_args()
    lengths = read_lengths(args.lengths)
    for name, (space, layout, budget, groups) in EXAMPLES.items():
        specs = [(0, MAX_SEQ_LEN, g) for g in groups]
        proposal = with_predictions(build_proposal(space(), layout, specs, budget, MAX_SEQ_LEN), lengths)
        path = Path(args.out) / f"{name}.json"
        write_proposal(path, proposal, config={"generator": "benchmarks/make_example_proposals.py",
                                               "lengths": args.lengths})
        print(f"wrote {path}: {len(proposal.strategies)} strategies on {proposal.devices} devices")


if __name__ == "__main__":
    main()
