"""The planning work behind each route, run in the worker processes (:mod:`.pool`).

Each function takes the route's validated request body and the service settings and returns the
JSON value of the answer; it raises :class:`~hydraulis.base.errors.HydraulisError` for bad input and
:class:`~hydraulis.service.errors.ServiceError` for a request beyond the service's limits. A new
route adds one such function here and one route in :mod:`.app` that passes it to the pool.

A worker keeps the last few proposals it parsed and validated (keyed by their JSON text), so a
training job that sends the same proposal with every step pays for its validation once.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import asdict
from typing import Any

import numpy as np

from hydraulis import __version__
from hydraulis.artifacts import (
    proposal_from_dict,
    proposal_to_dict,
    scheme_space_from_dict,
    scheme_space_to_dict,
    step_plan_to_dict,
    timestamp,
)
from hydraulis.artifacts.assignments import assignments_to_dict
from hydraulis.artifacts.fused import fused_problem_from_dict, fused_schedule_to_dict
from hydraulis.artifacts.memory_report import memory_report_to_dict
from hydraulis.artifacts.step_comparison import step_comparison_to_dict
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import Cluster, OptimizerLayout, Proposal
from hydraulis.data.synth import synth_lengths
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.assigned_steps import Samples, assign_steps
from hydraulis.dispatch.synthesis import Synthesise, plan_step, synthesis_options
from hydraulis.fused import FuseOptions, fuse, fused_schedule
from hydraulis.planner import PlannerConfig, propose, validate_proposal
from hydraulis.planner.space_rows import space_rows
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.service.errors import ServiceError
from hydraulis.service.schemas import (
    AnalyticSpaceRequest,
    DispatchRequest,
    FusedScheduleRequest,
    MemoryRequest,
    ProposalRequest,
    StepAssignmentsRequest,
    StepComparisonRequest,
    StepPlanRequest,
    SyntheticLengthsRequest,
    ValidateSpaceRequest,
)
from hydraulis.service.settings import ServiceSettings
from hydraulis.simulation import compare_step

PROPOSAL_CACHE = 8
"""Proposals a worker keeps parsed and validated."""

_proposals: OrderedDict[str, Proposal] = OrderedDict()


def validate_space(body: ValidateSpaceRequest, settings: ServiceSettings) -> dict[str, Any]:
    space = scheme_space_from_dict(body.scheme_space)
    check_devices(space.cluster.devices, settings)
    layout = body.optimizer_layout.to_core() if body.optimizer_layout else OptimizerLayout(space.cluster.devices, 1, 1)
    return {"valid": True, "optimizer_layout": asdict(layout), "schemes": space_rows(space, layout)}


def analytic_space(body: AnalyticSpaceRequest, settings: ServiceSettings) -> dict[str, Any]:
    device = device_preset(body.device)
    cluster = Cluster(body.devices, body.devices_per_node or device.devices_per_node, device.name)
    space = analytic_scheme_space(model_preset(body.model), device, cluster, body.cp, body.tp, body.pp,
                                  created=timestamp(), tool_version=__version__,
                                  command="POST /v1/scheme-spaces/analytic")
    return scheme_space_to_dict(space)


def proposal(body: ProposalRequest, settings: ServiceSettings) -> dict[str, Any]:
    space = scheme_space_from_dict(body.scheme_space)
    config = PlannerConfig(devices=body.devices, devices_per_node=body.devices_per_node,
                           token_budget=body.token_budget, max_seq_len=body.max_seq_len,
                           strategies=body.strategies, seed=body.seed, solver_nodes=body.solver_nodes,
                           search_evaluations=body.search_evaluations,
                           time_limit_s=time_limit(body.time_limit_s, settings),
                           loss_chunk_tokens=body.loss_chunk_tokens)
    return proposal_to_dict(propose(space, request_lengths(body, settings), config), config.to_dict())


def step_plan(body: StepPlanRequest, settings: ServiceSettings) -> dict[str, Any]:
    parsed = cached_proposal(body.proposal, settings)
    options = _dispatch_options(body, settings)
    space = None if body.scheme_space is None else scheme_space_from_dict(body.scheme_space)
    synthesis = synthesis_options(body.synthesise, body.synthesis_evaluations, parsed, space)
    return step_plan_to_dict(plan_step(parsed, np.asarray(body.lengths, dtype=np.int64), body.method, options,
                                       synthesis))


def step_assignments(body: StepAssignmentsRequest, settings: ServiceSettings) -> dict[str, Any]:
    parsed = cached_proposal(body.proposal, settings)
    if body.single_strategy and "synthesise" in body.model_fields_set:
        raise HydraulisError("synthesise", body.synthesise.value, "makes a strategy per step: leave it out with "
                                                                   "single_strategy")
    space = None if body.scheme_space is None else scheme_space_from_dict(body.scheme_space)
    mode = Synthesise.OFF if body.single_strategy else body.synthesise
    synthesis = synthesis_options(mode, body.synthesis_evaluations, parsed, space)
    steps = [Samples(tuple(s.id for s in step.samples), tuple(s.length for s in step.samples)) for step in body.steps]
    assigned = assign_steps(parsed, steps, body.method, _dispatch_options(body, settings), synthesis,
                            body.single_strategy)
    return {"steps": [assignments_to_dict(step) for step in assigned]}


def _dispatch_options(body: DispatchRequest, settings: ServiceSettings) -> DispatchOptions:
    return DispatchOptions(seed=body.seed, ilp_nodes=body.ilp_nodes, ilp_solver=body.ilp_solver,
                           ilp_time_limit_s=time_limit(body.time_limit_s, settings), alignment=body.alignment,
                           oversize=body.oversize)


def synthetic_lengths(body: SyntheticLengthsRequest, settings: ServiceSettings) -> dict[str, Any]:
    return {"lengths": synth_lengths(body.docs, body.shape(), body.seed).tolist()}


def step_comparison(body: StepComparisonRequest, settings: ServiceSettings) -> dict[str, Any]:
    space = scheme_space_from_dict(body.scheme_space)
    proposal = validate_proposal(proposal_from_dict(body.proposal), space)
    check_devices(proposal.devices, settings)
    return step_comparison_to_dict(compare_step(space, proposal, request_lengths(body, settings), body.seed))


def fused_schedule_of(body: FusedScheduleRequest, settings: ServiceSettings) -> dict[str, Any]:
    problem = fused_problem_from_dict(body.problem)
    check_devices(problem.devices, settings)
    options = FuseOptions(time_limit_s=time_limit(body.time_limit_s, settings), seed=body.seed,
                          memory_limit=body.memory_limit)
    return fused_schedule_to_dict(fused_schedule(fuse(problem, options)), asdict(options))


def memory(body: MemoryRequest, settings: ServiceSettings) -> dict[str, Any]:
    """``hydraulis memory``'s report; torch is imported by the worker that first answers one."""
    from hydraulis.job.memory_report import MemoryConfig
    from hydraulis.runtime.memory.report import memory_report

    layout = body.optimizer_layout.to_core() if body.optimizer_layout else None
    config = MemoryConfig(model_preset(body.model), body.strategy, body.devices, body.device, body.devices_per_node,
                          layout, body.tokens)
    return memory_report_to_dict(memory_report(config))


def cached_proposal(document: dict[str, Any], settings: ServiceSettings) -> Proposal:
    """The proposal ``document`` parsed and validated, from this worker's cache when it is there."""
    key = json.dumps(document)
    if key in _proposals:
        _proposals.move_to_end(key)
        return _proposals[key]
    parsed = validate_proposal(proposal_from_dict(document))
    check_devices(parsed.devices, settings)
    _proposals[key] = parsed
    if len(_proposals) > PROPOSAL_CACHE:
        _proposals.popitem(last=False)
    return parsed


def time_limit(requested: float | None, settings: ServiceSettings) -> float:
    """A request's safety stop, or the service's default."""
    return settings.default_time_limit_s if requested is None else requested


def request_lengths(body: ProposalRequest | StepComparisonRequest, settings: ServiceSettings) -> np.ndarray:
    """The document lengths of a request: ``lengths``, or ``histogram`` expanded."""
    if (body.lengths is None) == (body.histogram is None):
        raise HydraulisError("lengths", None, "give exactly one of lengths and histogram")
    if body.lengths is not None:
        return np.asarray(body.lengths, dtype=np.int64)
    histogram = body.histogram
    if len(histogram.lengths) != len(histogram.counts):
        raise HydraulisError("histogram.counts", len(histogram.counts),
                             f"must have one entry per length ({len(histogram.lengths)})")
    check_sequences(sum(histogram.counts), settings)
    return np.repeat(np.asarray(histogram.lengths, dtype=np.int64), histogram.counts)


def check_sequences(count: int, settings: ServiceSettings) -> None:
    """413 when a request holds more sequences than the service takes."""
    if count > settings.max_sequences:
        raise ServiceError(413, "too_many_sequences", f"{count} sequences exceed this service's max_sequences = "
                                                      f"{settings.max_sequences}", "lengths")


def check_devices(devices: int, settings: ServiceSettings) -> None:
    """422 when a request plans for more devices than the service takes."""
    if devices > settings.max_devices:
        raise HydraulisError("devices", devices, f"exceeds this service's max_devices = {settings.max_devices}")


def check_proposal_work(body: ProposalRequest, settings: ServiceSettings) -> None:
    """413 when ``devices × strategies`` exceeds the service's ``max_device_strategies``."""
    check_devices(body.devices, settings)
    work = body.devices * body.strategies
    if work > settings.max_device_strategies:
        raise ServiceError(413, "too_much_work", f"devices × strategies = {body.devices} × {body.strategies} = "
                                                 f"{work} exceeds this service's max_device_strategies = "
                                                 f"{settings.max_device_strategies}", "strategies")
