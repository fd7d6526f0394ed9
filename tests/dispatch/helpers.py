"""Proposals built by hand for dispatch tests (the planner is not used here)."""

from __future__ import annotations

from pathlib import Path

from hydraulis.artifacts import read_proposal
from hydraulis.presets import model_preset
from hydraulis.types import (
    OptimizerLayout,
    PipelineGroup,
    PipelineModel,
    Proposal,
    ProposedStrategy,
    Scheme,
    SolverReport,
    Strategy,
    TimeCoefficients,
)

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
