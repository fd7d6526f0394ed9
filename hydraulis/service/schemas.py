"""Request and response bodies. They only convert to and from the core types: artifacts are
passed as their JSON documents and parsed by :mod:`hydraulis.artifacts`, so the HTTP API and
the files are one format."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from hydraulis.data.synth import LongTail
from hydraulis.dispatch import OversizePolicy
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.solver import SolverName
from hydraulis.types import BatchingMethod, OptimizerLayout


Int64 = Annotated[int, Field(ge=-(2**62), le=2**62)]
"""An integer that fits numpy's int64 (the library then checks its real range and names it)."""


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LayoutBody(Body):
    dp: int = Field(ge=1, le=1_000_000)
    tp: int = Field(ge=1, le=1_000_000)
    pp: int = Field(ge=1, le=1_000_000)

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
    options: list[str] = Field(description="non-default scheme options, e.g. [\"sp\", \"recompute=full\"]")
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
    devices: int = Field(ge=1)
    devices_per_node: int | None = Field(default=None, ge=1, le=1024)
    cp: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
    tp: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
    pp: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)


class Histogram(Body):
    """Document counts per length: ``counts[i]`` documents of ``lengths[i]`` tokens (e.g. bucket
    representatives of a histogram)."""

    lengths: list[Int64] = Field(min_length=1, max_length=1_000_000)
    counts: list[Int64] = Field(min_length=1, max_length=1_000_000)


class ProposalRequest(Body):
    scheme_space: dict[str, Any] = Field(description="a scheme-space document (hydraulis space ... -o)")
    devices: int = Field(ge=1)
    devices_per_node: int = Field(ge=1, le=1024)
    token_budget: int = Field(ge=1)
    max_seq_len: int = Field(ge=1)
    lengths: list[Int64] | None = Field(default=None, description="document lengths (give this or histogram)")
    histogram: Histogram | None = Field(default=None, description="document counts per length")
    strategies: int = Field(default=8, ge=1, le=64)
    time_limit_s: float | None = Field(default=None, ge=0, description="safety stop of the planner's searches, "
                                       "seconds (they are bounded by work budgets; the proposal's solver status "
                                       "says when this fired)")
    seed: int = Field(default=0, ge=0)


class StepPlanRequest(Body):
    proposal: dict[str, Any] = Field(description="a proposal document (POST /v1/proposals, hydraulis propose)")
    lengths: list[Int64] = Field(description="the global batch: one length per sequence")
    method: BatchingMethod = BatchingMethod.DISPATCH_BALANCED_PACKING
    seed: int = Field(default=0, ge=0)
    ilp_nodes: int = Field(default=0, ge=0, le=10_000_000,
                           description="branch-and-bound nodes of the packing ILP per pipeline (0 skips it)")
    ilp_solver: SolverName = SolverName.CBC
    time_limit_s: float | None = Field(default=None, ge=0, description="safety stop of the packing ILPs, seconds")
    alignment: int = Field(default=1, ge=1, le=65536)
    oversize: OversizePolicy = OversizePolicy.ERROR
    synthesise: Synthesise = Field(default=Synthesise.PROPOSAL,
                                   description="make a strategy for the step from the proposal's schemes, the "
                                               "scheme space's (needs scheme_space), or never (off)")
    synthesis_evaluations: int = Field(default=SynthesisOptions.evaluations, ge=0, le=1000,
                                       description="strategies the dispatcher may plan while synthesising")
    scheme_space: dict[str, Any] | None = Field(default=None,
                                                description="the scheme space the proposal was made from "
                                                            "(synthesise=space)")


class SyntheticLengthsRequest(Body):
    """A synthetic long tail (:mod:`hydraulis.data.synth`): a lognormal body with a Pareto tail."""

    docs: int = Field(ge=1, description="how many document lengths to draw")
    seed: int = Field(default=0, ge=0)
    body_mu: float = Field(LongTail.body_mu, description="μ of the lognormal body: its median is e^μ tokens")
    body_sigma: float = Field(LongTail.body_sigma, description="σ of the lognormal body")
    tail_start: int = Field(LongTail.tail_start, description="where the Pareto tail starts, in tokens")
    tail_alpha: float = Field(LongTail.tail_alpha, description="index α of the tail: P(s > x) = (tail_start/x)^α")
    tail_share: float = Field(LongTail.tail_share, description="probability that a document comes from the tail")
    max_len: int = Field(LongTail.max_len, description="every length is capped here")

    def shape(self) -> LongTail:
        return LongTail(self.body_mu, self.body_sigma, self.tail_start, self.tail_alpha, self.tail_share, self.max_len)


class StepComparisonRequest(Body):
    scheme_space: dict[str, Any] = Field(description="the scheme space the proposal was made from")
    proposal: dict[str, Any] = Field(description="a proposal document (POST /v1/proposals, hydraulis propose)")
    lengths: list[Int64] | None = Field(default=None, description="document lengths to draw the step from "
                                                                  "(give this or histogram)")
    histogram: Histogram | None = Field(default=None, description="document counts per length")
    seed: int = Field(default=0, ge=0, description="draws the step's documents")


class FusedScheduleRequest(Body):
    problem: dict[str, Any] = Field(description="a fused problem document (hydraulis fuse --problem)")
    time_limit_s: float | None = Field(default=None, gt=0, description="search seconds (default: the service's)")
    seed: int = Field(default=0, ge=0)
    memory_limit: float | None = Field(default=None, gt=0, description="hard limit on any device's memory")
