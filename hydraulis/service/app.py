"""The planning service: an app factory and its routes, each parsing a body, calling one
library function off the event loop, and returning the artifact's JSON.

    uvicorn --factory hydraulis.service.app:app_from_environment      (or: hydraulis serve)
"""

from __future__ import annotations

import asyncio
import hmac
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from hydraulis import __version__
import numpy as np

from hydraulis.artifacts.step_comparison import step_comparison_to_dict
from hydraulis.artifacts import (
    proposal_from_dict,
    proposal_to_dict,
    scheme_space_from_dict,
    scheme_space_to_dict,
    step_plan_to_dict,
    timestamp,
)
from hydraulis.artifacts.fused import fused_problem_from_dict, fused_schedule_to_dict
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import plan_step, synthesis_options
from hydraulis.fused import FuseOptions, fuse, fused_schedule
from hydraulis.planner import PlannerConfig, propose, validate_proposal
from hydraulis.data.synth import synth_lengths
from hydraulis.errors import HydraulisError
from hydraulis.presets import device_names, device_preset, model_names, model_preset
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.profiler.report import space_rows
from hydraulis.service.pages import explorer_routes
from hydraulis.service.errors import ServiceError, install_error_handlers
from hydraulis.service.middleware import BodyLimit, RequestLog
from hydraulis.service.schemas import (
    AnalyticSpaceRequest,
    FusedScheduleRequest,
    LayoutBody,
    Presets,
    ProposalRequest,
    StepComparisonRequest,
    StepPlanRequest,
    SyntheticLengthsRequest,
    ValidateSpaceRequest,
    ValidateSpaceResponse,
)
from hydraulis.service.settings import ServiceSettings
from hydraulis.simulation import compare_step
from hydraulis.types import Cluster, OptimizerLayout

T = TypeVar("T")
_bearer = HTTPBearer(auto_error=False)


def create_app(settings: ServiceSettings = ServiceSettings()) -> FastAPI:
    app = FastAPI(title="Hydraulis planning service", version=__version__,
                  description="Proposals of heterogeneous parallel strategies and per-step plans.")
    app.state.settings = settings
    install_error_handlers(app)
    app.include_router(_health_routes())
    app.include_router(explorer_routes())
    app.include_router(_v1_routes(settings), prefix="/v1", dependencies=[Depends(_authorize)])
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["*"],
                           allow_headers=["*"])
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestLog)
    return app


def app_from_environment() -> FastAPI:
    """The app with settings from the process environment (``HYDRAULIS_API_TOKEN``)."""
    return create_app(ServiceSettings.from_environment(os.environ))


def _health_routes() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz() -> dict:
        return {"status": "ready", "version": __version__}

    return router


def _v1_routes(settings: ServiceSettings) -> APIRouter:
    router = APIRouter(tags=["planning"])

    @router.get("/presets", response_model=Presets)
    async def presets() -> Presets:
        models = {name: {k: v for k, v in asdict(model_preset(name)).items() if k != "name"} for name in model_names()}
        devices = {name: {k: v for k, v in asdict(device_preset(name)).items() if k != "name"}
                   for name in device_names()}
        return Presets(models=models, devices=devices)

    @router.post("/scheme-spaces/validate", response_model=ValidateSpaceResponse)
    async def validate_space(body: ValidateSpaceRequest) -> ValidateSpaceResponse:
        def work() -> ValidateSpaceResponse:
            space = scheme_space_from_dict(body.scheme_space)
            layout = body.optimizer_layout.to_core() if body.optimizer_layout else OptimizerLayout(
                space.cluster.devices, 1, 1)
            return ValidateSpaceResponse(valid=True, optimizer_layout=LayoutBody(**asdict(layout)),
                                         schemes=space_rows(space, layout))
        return await off_loop(work, settings.default_time_limit_s)

    @router.post("/scheme-spaces/analytic")
    async def analytic_space(body: AnalyticSpaceRequest) -> dict[str, Any]:
        check_devices(body.devices, settings)

        def work() -> dict[str, Any]:
            device = device_preset(body.device)
            cluster = Cluster(body.devices, body.devices_per_node or device.devices_per_node, device.name)
            space = analytic_scheme_space(model_preset(body.model), device, cluster, body.cp, body.tp, body.pp,
                                          created=timestamp(), tool_version=__version__, command="POST /v1/scheme-spaces/analytic")
            return scheme_space_to_dict(space)
        return await off_loop(work, settings.default_time_limit_s)

    @router.post("/proposals")
    async def proposals(body: ProposalRequest) -> dict[str, Any]:
        check_devices(body.devices, settings)
        time_limit = request_time_limit(body.time_limit_s, settings)
        lengths = request_lengths(body, settings)

        def work() -> dict[str, Any]:
            space = scheme_space_from_dict(body.scheme_space)
            config = PlannerConfig(devices=body.devices, devices_per_node=body.devices_per_node,
                                   token_budget=body.token_budget, max_seq_len=body.max_seq_len,
                                   strategies=body.strategies, seed=body.seed, time_limit_s=max(time_limit, 0.1))
            return proposal_to_dict(propose(space, lengths, config), config.to_dict())
        return await off_loop(work, 2 * time_limit + 5.0)

    @router.post("/step-plans")
    async def step_plans(body: StepPlanRequest) -> dict[str, Any]:
        check_sequences(len(body.lengths), settings)
        time_limit = request_time_limit(body.time_limit_s, settings)

        def work() -> dict[str, Any]:
            proposal = validate_proposal(proposal_from_dict(body.proposal))
            check_devices(proposal.devices, settings)
            options = DispatchOptions(seed=body.seed, ilp_nodes=body.ilp_nodes, ilp_solver=body.ilp_solver,
                                      ilp_time_limit_s=time_limit, alignment=body.alignment,
                                      oversize=body.oversize)
            space = None if body.scheme_space is None else scheme_space_from_dict(body.scheme_space)
            synthesis = synthesis_options(body.synthesise, body.synthesis_evaluations, proposal, space)
            lengths = np.asarray(body.lengths, dtype=np.int64)
            return step_plan_to_dict(plan_step(proposal, lengths, body.method, options, synthesis))
        return await off_loop(work, time_limit + settings.default_time_limit_s)

    @router.post("/lengths/synthetic")
    async def synthetic_lengths(body: SyntheticLengthsRequest) -> dict[str, Any]:
        check_sequences(body.docs, settings)

        def work() -> dict[str, Any]:
            return {"lengths": synth_lengths(body.docs, body.shape(), body.seed).tolist()}
        return await off_loop(work, settings.default_time_limit_s)

    @router.post("/step-comparisons")
    async def step_comparisons(body: StepComparisonRequest) -> dict[str, Any]:
        documents = request_lengths(body, settings)

        def work() -> dict[str, Any]:
            space = scheme_space_from_dict(body.scheme_space)
            proposal = validate_proposal(proposal_from_dict(body.proposal), space)
            check_devices(proposal.devices, settings)
            return step_comparison_to_dict(compare_step(space, proposal, documents, body.seed))
        return await off_loop(work, settings.default_time_limit_s)

    @router.post("/fused-schedules")
    async def fused_schedules(body: FusedScheduleRequest) -> dict[str, Any]:
        time_limit = request_time_limit(body.time_limit_s, settings)

        def work() -> dict[str, Any]:
            problem = fused_problem_from_dict(body.problem)
            check_devices(problem.devices, settings)
            options = FuseOptions(time_limit_s=time_limit, seed=body.seed, memory_limit=body.memory_limit)
            return fused_schedule_to_dict(fused_schedule(fuse(problem, options)), asdict(options))
        return await off_loop(work, time_limit + settings.default_time_limit_s)

    return router


def request_lengths(body: ProposalRequest | StepComparisonRequest, settings: ServiceSettings) -> np.ndarray:
    """The document lengths of a request: ``lengths``, or ``histogram`` expanded."""
    if (body.lengths is None) == (body.histogram is None):
        raise HydraulisError("lengths", None, "give exactly one of lengths and histogram")
    if body.lengths is not None:
        check_sequences(len(body.lengths), settings)
        return np.asarray(body.lengths, dtype=np.int64)
    histogram = body.histogram
    if len(histogram.lengths) != len(histogram.counts):
        raise HydraulisError("histogram.counts", len(histogram.counts),
                             f"must have one entry per length ({len(histogram.lengths)})")
    if min(histogram.counts) < 0:
        raise HydraulisError("histogram.counts", min(histogram.counts), "must be >= 0")
    check_sequences(sum(histogram.counts), settings)
    return np.repeat(np.asarray(histogram.lengths, dtype=np.int64), histogram.counts)


def request_time_limit(requested: float | None, settings: ServiceSettings) -> float:
    if requested is None:
        return settings.default_time_limit_s
    if requested > settings.max_time_limit_s:
        raise HydraulisError("time_limit_s", requested, f"exceeds this service's max_time_limit_s = "
                                                        f"{settings.max_time_limit_s}")
    return requested


def check_sequences(count: int, settings: ServiceSettings) -> None:
    if count > settings.max_sequences:
        raise ServiceError(413, "too_many_sequences", f"{count} sequences exceed this service's max_sequences = "
                                                      f"{settings.max_sequences}", "lengths")


async def off_loop(work: Callable[[], T], time_limit_s: float) -> T:
    """Run ``work`` in a worker thread; 504 when it outlives ``time_limit_s`` (plus a grace second)."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(work), timeout=time_limit_s + 1.0)
    except asyncio.TimeoutError:
        raise ServiceError(504, "timeout", f"planning exceeded the request's time limit of {time_limit_s} s",
                           "time_limit_s") from None


def check_devices(devices: int, settings: ServiceSettings) -> None:
    if devices > settings.max_devices:
        raise HydraulisError("devices", devices, f"exceeds this service's max_devices = {settings.max_devices}")


async def _authorize(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
    token = request.app.state.settings.auth_token
    if token is None:
        return
    given = credentials.credentials if credentials else ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise ServiceError(401, "unauthorized", "a valid bearer token is required (Authorization: Bearer ...)")
