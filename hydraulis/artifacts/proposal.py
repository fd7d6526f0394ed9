"""The proposal artifact: versioned JSON written by the planner, read by dispatch and runtime.

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "proposal", "model": {...}, "devices", "devices_per_node",
     "token_budget", "max_seq_len", "optimizer_layout": {"dp", "tp", "pp"},
     "pipeline_model": {"forward_fraction", "p2p_ms"}, "reduce_gbps", "communicator_ms", "reduce_overlap",
     "grad_reduce_bytes", "loss_chunk_tokens", "solver": {"status", "solver", "wall_ms", "message"}, "explanation",
     "strategies": [{"pipelines": [{"scheme": {"cp", "tp", "pp"}, "count", "max_seq_len",
                                    "time": {"a", "b", "c"}}],
                     "devices", "predicted_ms", "reduce_ms", "serves_from", "serves_to",
                     "headroom_bytes": [...], "explanation"}],
     "config": {...}}

``devices`` of a strategy is derived and checked on load; ``config`` is the resolved input the
proposal was made from (free-form, kept as written). ``reduce_gbps`` and ``communicator_ms``
(the scheme space's) are optional: a file without them gets 0 for ``communicator_ms`` and the
bandwidth its strategies' ``reduce_ms`` imply (:func:`implied_reduce_gbps`); ``reduce_overlap`` and
``grad_reduce_bytes`` too (absent: 0 and 2, what proposals made before them assumed), and
``loss_chunk_tokens`` (absent: 1,024, the runtime's default they were priced with).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.artifacts.scheme_space import (
    model_from_record,
    model_to_dict,
    pipeline_model_from_record,
    scheme_from_record,
    scheme_to_dict,
    time_from_record,
)
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import (
    LOSS_CHUNK_TOKENS,
    OptimizerLayout,
    PipelineGroup,
    Proposal,
    ProposedStrategy,
    SchemeSpace,
    SolverReport,
    Strategy,
)
from hydraulis.cost import step as step_cost
from hydraulis.planner.validate import validate_proposal

KIND = "proposal"
SCHEMA_VERSION = 1


def proposal_to_dict(proposal: Proposal, config: dict | None = None) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "model": model_to_dict(proposal.model),
        "devices": proposal.devices,
        "devices_per_node": proposal.devices_per_node,
        "token_budget": proposal.token_budget,
        "max_seq_len": proposal.max_seq_len,
        "optimizer_layout": asdict(proposal.optimizer_layout),
        "pipeline_model": asdict(proposal.pipeline_model),
        "reduce_gbps": proposal.reduce_gbps,
        "communicator_ms": proposal.communicator_ms,
        "reduce_overlap": proposal.reduce_overlap,
        "grad_reduce_bytes": proposal.grad_reduce_bytes,
        "loss_chunk_tokens": proposal.loss_chunk_tokens,
        "solver": asdict(proposal.solver),
        "strategies": [_strategy_to_dict(s) for s in proposal.strategies],
        "explanation": proposal.explanation,
        "config": config or {},
    }


def proposal_from_dict(document: object) -> Proposal:
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    layout = record.sub("optimizer_layout")
    solver = record.sub("solver")
    model = model_from_record(record.sub("model"))
    strategies = tuple(_strategy_from_record(r) for r in record.records("strategies"))
    return build("", Proposal,
        model=model,
        devices=record.int("devices"),
        devices_per_node=record.int("devices_per_node"),
        optimizer_layout=build("optimizer_layout", OptimizerLayout, dp=layout.int("dp"),
                               tp=layout.int("tp"), pp=layout.int("pp")),
        strategies=strategies,
        token_budget=record.int("token_budget"),
        max_seq_len=record.int("max_seq_len"),
        pipeline_model=pipeline_model_from_record(record.sub("pipeline_model")),
        solver=SolverReport(status=solver.str("status"), solver=solver.str("solver"),
                            wall_ms=solver.float("wall_ms"), message=solver.str("message", "")),
        explanation=record.str("explanation", ""),
        reduce_gbps=record.float("reduce_gbps", implied_reduce_gbps(model.params, strategies)),
        communicator_ms=record.float("communicator_ms", 0.0),
        reduce_overlap=record.float("reduce_overlap", 0.0),
        grad_reduce_bytes=record.int("grad_reduce_bytes", 2),
        loss_chunk_tokens=record.int("loss_chunk_tokens", LOSS_CHUNK_TOKENS),
    )


def implied_reduce_gbps(params: int, strategies: tuple[ProposedStrategy, ...]) -> float:
    """The bandwidth the first reducing strategy's ``reduce_ms`` implies
    (:func:`hydraulis.cost.step.implied_reduce_gbps`), 0 when none reduces."""
    for proposed in strategies:
        if proposed.reduce_ms > 0:
            schemes = [g.scheme for g in proposed.strategy.pipelines]
            return step_cost.implied_reduce_gbps(params, schemes, proposed.reduce_ms)
    return 0.0


def read_proposal(path: str | Path, space: SchemeSpace | None = None) -> Proposal:
    """Load and validate a proposal (hydraulis.planner.validate: structure, and memory when the
    scheme space is given); a broken one raises naming its first violation."""
    return validate_proposal(proposal_from_dict(read_json(path)), space)


def write_proposal(path: str | Path, proposal: Proposal, config: dict | None = None) -> None:
    write_json(path, proposal_to_dict(proposal, config))


def _strategy_to_dict(proposed: ProposedStrategy) -> dict:
    return {
        "pipelines": strategy_to_list(proposed.strategy),
        "devices": proposed.strategy.devices,
        "predicted_ms": proposed.predicted_ms,
        "reduce_ms": proposed.reduce_ms,
        "serves_from": proposed.serves_from,
        "serves_to": proposed.serves_to,
        "headroom_bytes": list(proposed.headroom_bytes),
        "explanation": proposed.explanation,
    }


def strategy_to_list(strategy: Strategy) -> list[dict]:
    """A strategy's pipeline groups as JSON: scheme, count, max_seq_len, time coefficients."""
    return [{"scheme": scheme_to_dict(g.scheme), "count": g.count, "max_seq_len": g.max_seq_len,
             "time": asdict(g.time)} for g in strategy.pipelines]


def strategy_from_record(record: Record, key: str = "pipelines") -> Strategy:
    """The strategy whose groups ``record[key]`` lists (:func:`strategy_to_list`)."""
    groups = tuple(
        build(g.path, PipelineGroup, scheme=scheme_from_record(g.sub("scheme")), count=g.int("count"),
              max_seq_len=g.int("max_seq_len"), time=time_from_record(g.sub("time")))
        for g in record.records(key)
    )
    return build(record.path, Strategy, pipelines=groups)


def _strategy_from_record(record: Record) -> ProposedStrategy:
    strategy = strategy_from_record(record)
    devices = record.int("devices", strategy.devices)
    if devices != strategy.devices:
        raise HydraulisError(f"{record.path}.devices", devices,
                             f"disagrees with its pipelines, which use {strategy.devices} devices")
    return build(record.path, ProposedStrategy,
        strategy=strategy,
        serves_from=record.int("serves_from"),
        serves_to=record.int("serves_to"),
        predicted_ms=record.float("predicted_ms"),
        reduce_ms=record.float("reduce_ms", 0.0),
        headroom_bytes=record.ints("headroom_bytes"),
        explanation=record.str("explanation", ""),
    )
