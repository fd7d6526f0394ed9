"""Proposals built by hand for dispatch tests (the planner is not used here)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from hydraulis.artifacts import read_proposal
from hydraulis.base.presets import model_preset
from hydraulis.base.types import (
    OptimizerLayout,
    PipelineGroup,
    PipelineModel,
    Proposal,
    ProposedStrategy,
    Scheme,
    SolverReport,
    StepPlan,
    Strategy,
    TimeCoefficients,
)
from hydraulis.cost import reduce_ms, simulate_1f1b
from hydraulis.dispatch import OversizePolicy, micro_batch_times_ms

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_proposal(name: str) -> Proposal:
    """A committed example proposal, e.g. ``7b_64dev`` (benchmarks/make_example_proposals.py)."""
    return read_proposal(EXAMPLES / "proposals" / f"{name}.json")


def group(pp: int, count: int, capacity: int, a: float, b: float, c: float, tp: int = 1) -> PipelineGroup:
    return PipelineGroup(Scheme(1, tp, pp), count, capacity, TimeCoefficients(a, b, c))


def proposal(*strategies: tuple[PipelineGroup, ...], reduce_ms: tuple[float, ...] = (),
             forward_fraction: float = 1.0 / 3.0, p2p_ms: float = 0.0, max_seq_len: int | None = None) -> Proposal:
    """A proposal of ``strategies`` (each a tuple of groups) for LLaMA-7B shapes on just enough
    devices; ``reduce_ms`` per strategy (default 0)."""
    built = [Strategy(tuple(groups)) for groups in strategies]
    devices = max(s.devices for s in built)
    reductions = reduce_ms or (0.0,) * len(built)
    longest = max(s.max_seq_len for s in built)
    return Proposal(
        model=model_preset("llama-7b"),
        devices=devices,
        devices_per_node=8,
        optimizer_layout=OptimizerLayout(devices, 1, 1),
        strategies=tuple(
            ProposedStrategy(s, 0, s.max_seq_len, 0.0, r, (0,) * len(s.pipelines)) for s, r in zip(built, reductions)),
        token_budget=max(longest, 1),
        max_seq_len=max_seq_len or longest,
        pipeline_model=PipelineModel(forward_fraction, p2p_ms),
        solver=SolverReport("hand_written", "none", 0.0),
    )


def check_plan(prop: Proposal, plan: StepPlan, batch, alignment: int, policy: OversizePolicy, limit: int) -> None:
    """Every sequence placed exactly once (whole, truncated or split by ``policy``), no
    micro-batch above its pipeline's capacity, exact 1F1B times, the step time their maximum plus
    the reduction (and a synthesised strategy's switch), a valid lower bound."""
    groups_of_plan = plan.strategy(prop).expanded()
    assert [p.scheme for p in plan.pipelines] == [g.scheme for g in groups_of_plan]
    placed = defaultdict(list)
    for pipeline, g in zip(plan.pipelines, groups_of_plan):
        assert pipeline.max_seq_len == g.max_seq_len
        for mb in pipeline.micro_batches:
            assert mb.sequences, "a micro-batch holds at least one sequence"
            assert mb.cu_seqlens(alignment)[-1] <= g.max_seq_len, "micro-batch above capacity"
            for index, length in zip(mb.sequences, mb.lengths):
                assert -(-length // alignment) * alignment <= g.max_seq_len, "sequence longer than the pipeline holds"
                placed[index].append(length)
    assert sorted(placed) == list(range(len(batch))), "every sequence placed"
    for index, length in enumerate(batch):
        aligned = -(-length // alignment) * alignment
        if aligned <= limit:
            assert placed[index] == [length], "placed exactly once, whole"
        elif policy is OversizePolicy.TRUNCATE:
            assert placed[index] == [limit]
        else:
            assert sum(placed[index]) == length and max(placed[index]) <= limit
    for pipeline, times in zip(plan.pipelines, micro_batch_times_ms(plan, plan.strategy(prop))):
        expected = simulate_1f1b(times, pipeline.scheme.pp, prop.pipeline_model).makespan_ms if times else 0.0
        assert pipeline.predicted_ms == pytest.approx(expected, rel=1e-9, abs=1e-9)
    made = plan.synthesis
    reduction = made.reduce_ms + made.switch_ms if made else prop.strategies[plan.strategy_index].reduce_ms
    assert plan.predicted_ms == pytest.approx(max(p.predicted_ms for p in plan.pipelines) + reduction)
    assert plan.lower_bound_ms <= plan.predicted_ms * (1 + 1e-9)


MODEL = model_preset("llama-7b")


def kind(tp: int, pp: int, capacity: int, a: float, b: float, c: float) -> PipelineGroup:
    return PipelineGroup(Scheme(1, tp, pp), 1, capacity, TimeCoefficients(a, b, c))


def consistent_proposal(strategies: list[list[tuple[PipelineGroup, int]]], devices: int, reduce_gbps: float = 0.0,
                        communicator_ms: float = 0.0, p2p_ms: float = 0.0) -> Proposal:
    """A proposal whose reductions follow the cost model (ZeRO-1 over all devices)."""
    layout = OptimizerLayout(devices, 1, 1)
    proposed = []
    for groups in strategies:
        strategy = Strategy(tuple(replace(g, count=n) for g, n in groups))
        reduction = reduce_ms(MODEL.params, [g.scheme for g in strategy.expanded()], layout, reduce_gbps)
        proposed.append(ProposedStrategy(strategy, 0, strategy.max_seq_len, 0.0, reduction, (0,) * len(groups)))
    longest = max(p.strategy.max_seq_len for p in proposed)
    return Proposal(MODEL, devices, 8, layout, tuple(proposed), longest, longest, PipelineModel(p2p_ms=p2p_ms),
                    SolverReport("hand_written", "none", 0.0), reduce_gbps=reduce_gbps,
                    communicator_ms=communicator_ms)


FAST = kind(4, 1, 100_000, 0.0, 0.03, 1.0)
"""A (1,4,1) kind that holds long sequences and runs them fast, on 4 devices."""
CHEAP = kind(1, 1, 2_000, 0.0, 0.1, 1.0)
"""A (1,1,1) kind, cheaper per device but short."""
BATCH = [20_000] + [1_000] * 30
"""A step that runs faster on 1×FAST + 4×CHEAP than on 2×FAST (8×CHEAP cannot hold it)."""
