"""The planning service: an app factory and its routes. Each planning route parses its body,
checks the request's work against the service's limits, and runs one function of
:mod:`hydraulis.service.work` in the worker pool (:mod:`hydraulis.service.pool`), whose answer
is the artifact's JSON (design §11).

    uvicorn --factory hydraulis.service.app:app_from_environment      (or: hydraulis serve)

Adding a planning route: a function ``work.thing(body, settings) -> dict`` and a route that
checks what it can cheaply and returns ``await planning(request, work.thing, body, deadline_s)``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response, Security
from fastapi.middleware.cors import CORSMiddleware
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from hydraulis import __version__
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_names, device_preset, model_names, model_preset
from hydraulis.service import work
from hydraulis.service.docs import install_docs
from hydraulis.service.errors import install_error_handlers
from hydraulis.service.middleware import Admission, BearerAuth, BodyLimit, RequestLog
from hydraulis.service.pages import explorer_routes
from hydraulis.service.pool import WorkerPool
from hydraulis.service.schemas import (
    AnalyticSpaceRequest,
    FusedScheduleRequest,
    MemoryRequest,
    Presets,
    ProposalRequest,
    StepAssignmentsRequest,
    StepComparisonRequest,
    StepPlanRequest,
    SyntheticLengthsRequest,
    ValidateSpaceRequest,
    ValidateSpaceResponse,
)
from hydraulis.service.settings import ServiceSettings

JSON_OBJECT = {200: {"content": {"application/json": {"schema": {"type": "object"}}}}}
CLIENT_GONE = 499
"""The status logged for a request whose client went away before its answer (nginx's code)."""


def create_app(settings: ServiceSettings = ServiceSettings()) -> FastAPI:
    pool = WorkerPool(settings.workers, settings.queue)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.start()
        yield
        pool.close()

    app = FastAPI(title="Hydraulis planning service", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None,
                  description="Proposals of heterogeneous parallel strategies and per-step plans.")
    app.state.settings, app.state.pool = settings, pool
    install_error_handlers(app)
    install_docs(app)
    app.include_router(_health_routes(pool))
    app.include_router(explorer_routes())
    app.include_router(_v1_routes(settings), prefix="/v1", dependencies=[Security(HTTPBearer(auto_error=False))])
    app.add_middleware(Admission, pool=pool)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    app.add_middleware(BearerAuth, token=settings.auth_token)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["*"],
                           allow_headers=["*"])
    app.add_middleware(RequestLog)
    return app


def app_from_environment() -> FastAPI:
    """The app with settings from the process environment (``HYDRAULIS_API_TOKEN``)."""
    return create_app(ServiceSettings.from_environment(os.environ))


async def planning(request: Request, function: Callable[[Any, ServiceSettings], Any], body: BaseModel,
                   deadline_s: float) -> Response:
    """``function(body, settings)`` in the worker pool, its JSON as the response; when the
    client goes away first, the work is cancelled (the pool stops and replaces its worker)."""
    settings: ServiceSettings = request.app.state.settings
    work = asyncio.ensure_future(request.app.state.pool.run(function, body, settings, deadline_s))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
    if work.cancelled():
        return Response(status_code=CLIENT_GONE)
    return Response(content=work.result(), media_type="application/json")


async def _disconnected(request: Request) -> None:
    """Return once the client has gone away (the body is read already: ``receive`` waits for
    the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        await asyncio.sleep(0.1)


def _health_routes(pool: WorkerPool) -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz() -> dict:
        return {"status": "ready", "version": __version__, **pool.stats()}

    return router


def _v1_routes(settings: ServiceSettings) -> APIRouter:
    router = APIRouter(tags=["planning"])
    grace = settings.default_time_limit_s

    @router.get("/presets", response_model=Presets)
    async def presets() -> Presets:
        models = {name: {k: v for k, v in asdict(model_preset(name)).items() if k != "name"} for name in model_names()}
        devices = {name: {k: v for k, v in asdict(device_preset(name)).items() if k != "name"}
                   for name in device_names()}
        return Presets(models=models, devices=devices)

    @router.post("/scheme-spaces/validate", responses={200: {"model": ValidateSpaceResponse}})
    async def validate_space(body: ValidateSpaceRequest, request: Request) -> Response:
        return await planning(request, work.validate_space, body, grace)

    @router.post("/scheme-spaces/analytic", responses=JSON_OBJECT)
    async def analytic_space(body: AnalyticSpaceRequest, request: Request) -> Response:
        work.check_devices(body.devices, settings)
        return await planning(request, work.analytic_space, body, grace)

    @router.post("/proposals", responses=JSON_OBJECT)
    async def proposals(body: ProposalRequest, request: Request) -> Response:
        work.check_proposal_work(body, settings)
        if body.lengths is not None:
            work.check_sequences(len(body.lengths), settings)
        time_limit = _time_limit(work.time_limit(body.time_limit_s, settings), settings)
        return await planning(request, work.proposal, body, 2 * time_limit + grace)

    @router.post("/step-plans", responses=JSON_OBJECT)
    async def step_plans(body: StepPlanRequest, request: Request) -> Response:
        work.check_sequences(len(body.lengths), settings)
        time_limit = _time_limit(work.time_limit(body.time_limit_s, settings), settings)
        return await planning(request, work.step_plan, body, time_limit + grace)

    @router.post("/step-assignments", responses=JSON_OBJECT)
    async def step_assignments(body: StepAssignmentsRequest, request: Request) -> Response:
        """Each step's per-rank micro-batches as the samples' ids, with the strategy, predicted times and
        each stage's layers: ``{"steps": [step_assignments document, ...]}`` (the shipped JSON Schema)."""
        work.check_sequences(sum(len(step.samples) for step in body.steps), settings)
        time_limit = _time_limit(work.time_limit(body.time_limit_s, settings), settings)
        return await planning(request, work.step_assignments, body, len(body.steps) * (time_limit + grace))

    @router.post("/lengths/synthetic", responses=JSON_OBJECT)
    async def synthetic_lengths(body: SyntheticLengthsRequest, request: Request) -> Response:
        work.check_sequences(body.docs, settings)
        return await planning(request, work.synthetic_lengths, body, grace)

    @router.post("/step-comparisons", responses=JSON_OBJECT)
    async def step_comparisons(body: StepComparisonRequest, request: Request) -> Response:
        if body.lengths is not None:
            work.check_sequences(len(body.lengths), settings)
        return await planning(request, work.step_comparison, body, grace)

    @router.post("/fused-schedules", responses=JSON_OBJECT)
    async def fused_schedules(body: FusedScheduleRequest, request: Request) -> Response:
        time_limit = _time_limit(work.time_limit(body.time_limit_s, settings), settings)
        return await planning(request, work.fused_schedule_of, body, time_limit + grace)

    @router.post("/memory", responses=JSON_OBJECT)
    async def memory(body: MemoryRequest, request: Request) -> Response:
        work.check_devices(body.devices, settings)
        return await planning(request, work.memory, body, settings.max_time_limit_s)

    return router


def _time_limit(requested: float, settings: ServiceSettings) -> float:
    if requested > settings.max_time_limit_s:
        raise HydraulisError("time_limit_s", requested, f"exceeds this service's max_time_limit_s = "
                                                        f"{settings.max_time_limit_s}")
    return requested
