"""Request and response bodies. They only convert to and from the core types: artifacts are
passed as their JSON documents and parsed by :mod:`hydraulis.artifacts`, so the HTTP API and
the files are one format."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from hydraulis import limits
from hydraulis.dispatch import OversizePolicy
from hydraulis.limits import Limit
from hydraulis.solver import SolverName
from hydraulis.types import BatchingMethod, OptimizerLayout


def within(limit: Limit, **extra: Any) -> Any:
    """A field within ``limit`` (:mod:`hydraulis.limits`), so the OpenAPI schema states the range."""
    low = {"gt": limit.minimum} if limit.exclusive_minimum else {"ge": limit.minimum}
    if limit.integer:
        low = {key: int(value) for key, value in low.items()}
        return Field(**low, le=int(limit.maximum), **extra)
    return Field(**low, le=limit.maximum, allow_inf_nan=False, **extra)


Length = Annotated[int, within(limits.LENGTH)]
Degree = Annotated[int, within(limits.PARALLEL_DEGREE)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LayoutBody(Body):
    dp: Degree
    tp: Degree
    pp: Degree

    def to_core(self) -> OptimizerLayout:
        return OptimizerLayout(self.dp, self.tp, self.pp)


class Presets(BaseModel):
    models: dict[str, dict[str, int | float]]
    devices: dict[str, dict[str, float | int]]


class ValidateSpaceRequest(Body):
    scheme_space: dict[str, Any] = Field(description="a scheme-space document (hydraulis space ... -o)")
    optimizer_layout: LayoutBody | None = Field(
        default=None, description="layout for the longest-sequence column (default: ZeRO-1 over all devices)")


class SchemeRow(BaseModel):
    cp: int
    tp: int
    pp: int
    devices: int
    a: float
    b: float
    c: float
    max_seq_len: int
    limit: str
    states_bytes: float
    activation_bytes_per_token: float


class ValidateSpaceResponse(BaseModel):
    valid: bool
    optimizer_layout: LayoutBody
    schemes: list[SchemeRow]


class AnalyticSpaceRequest(Body):
    model: str = Field(description="model preset, see GET /v1/presets")
    device: str = Field(description="device preset, see GET /v1/presets")
    devices: int = within(limits.DEVICES)
    devices_per_node: int | None = within(limits.DEVICES_PER_NODE, default=None)
    cp: list[Degree] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
    tp: list[Degree] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
    pp: list[Degree] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)


class Histogram(Body):
    """Document counts per length: ``counts[i]`` documents of ``lengths[i]`` tokens (e.g. bucket
    representatives of a histogram)."""

    lengths: list[Length] = Field(min_length=1, max_length=1_000_000)
    counts: list[Annotated[int, Field(ge=0, le=int(limits.LENGTHS.maximum))]] = Field(min_length=1,
                                                                                      max_length=1_000_000)


class ProposalRequest(Body):
    scheme_space: dict[str, Any] = Field(description="a scheme-space document (hydraulis space ... -o)")
    devices: int = within(limits.DEVICES)
    devices_per_node: int = within(limits.DEVICES_PER_NODE)
    token_budget: int = within(limits.TOKEN_BUDGET)
    max_seq_len: int = within(limits.MAX_SEQ_LEN)
    lengths: list[Length] | None = Field(default=None, description="document lengths (give this or histogram)")
    histogram: Histogram | None = Field(default=None, description="document counts per length")
    strategies: int = within(limits.STRATEGIES, default=8)
    time_limit_s: float | None = within(limits.TIME_LIMIT_S, default=None,
                                        description="safety stop of the planner's searches, seconds (they are "
                                                    "bounded by work budgets; the proposal's solver status says "
                                                    "when this fired)")
    seed: int = within(limits.SEED, default=0)


class StepPlanRequest(Body):
    proposal: dict[str, Any] = Field(description="a proposal document (POST /v1/proposals, hydraulis propose)")
    lengths: list[Length] = Field(min_length=1, description="the global batch: one length per sequence")
    method: BatchingMethod = BatchingMethod.DISPATCH_BALANCED_PACKING
    seed: int = within(limits.SEED, default=0)
    ilp_nodes: int = within(limits.ILP_NODES, default=0,
                            description="branch-and-bound nodes of the packing ILP per pipeline (0 skips it)")
    ilp_solver: SolverName = SolverName.CBC
    time_limit_s: float | None = within(limits.ILP_TIME_LIMIT_S, default=None,
                                        description="safety stop of the packing ILPs, seconds")
    alignment: int = within(limits.ALIGNMENT, default=1)
    oversize: OversizePolicy = OversizePolicy.ERROR
