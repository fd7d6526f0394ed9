"""Request and response bodies. They only convert to and from the core types: artifacts are
passed as their JSON documents and parsed by :mod:`hydraulis.artifacts`, so the HTTP API and
the files are one format."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from hydraulis.base import limits
from hydraulis.base.limits import Limit
from hydraulis.base.solver import SolverName
from hydraulis.base.types import BatchingMethod, OptimizerLayout
from hydraulis.data.synth import LongTail
from hydraulis.dispatch import OversizePolicy
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.planner import PlannerConfig


def within(limit: Limit, **extra: Any) -> Any:
    """A field within ``limit`` (:mod:`hydraulis.base.limits`), so the OpenAPI schema states the range."""
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
    options: list[str] = Field(description="non-default scheme options, e.g. [\"sp\", \"recompute=full\"]")
    sp: bool = Field(default=False, description="sequence parallelism")
    recompute: str = Field(default="none", description="recomputation: none, selective or full")
    recompute_layers: list[int] = Field(default_factory=list,
                                        description="layers recomputed in full per stage (even split)")
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
    solver_nodes: int = within(limits.SOLVER_NODES, default=PlannerConfig.solver_nodes,
                               description="branch-and-bound nodes of each integer program: with "
                                           "search_evaluations, the work budgets the proposal depends on "
                                           "(hydraulis propose --solver-nodes)")
    search_evaluations: int = within(limits.SEARCH_EVALUATIONS, default=PlannerConfig.search_evaluations,
                                     description="strategies the local search may judge per range, 0: integer "
                                                 "programs only (hydraulis propose --search-evaluations)")
    time_limit_s: float | None = within(limits.TIME_LIMIT_S, default=None,
                                        description="safety stop of the planner's searches, seconds (they are "
                                                    "bounded by the work budgets above; the proposal's solver "
                                                    "status says time_limit when this fired)")
    seed: int = within(limits.SEED, default=0)
    loss_chunk_tokens: int = within(limits.LOSS_CHUNK_TOKENS, default=PlannerConfig.loss_chunk_tokens,
                                    description="the runtime's loss in chunks of this many tokens, which the "
                                                "memory is priced with (0: all at once; hydraulis propose "
                                                "--loss-chunk-tokens)")


class DispatchRequest(Body):
    """What plans a step: the proposal, the batching method and the dispatcher's options."""

    proposal: dict[str, Any] = Field(description="a proposal document (POST /v1/proposals, hydraulis propose)")
    method: BatchingMethod = BatchingMethod.DISPATCH_BALANCED_PACKING
    seed: int = within(limits.SEED, default=0)
    ilp_nodes: int = within(limits.ILP_NODES, default=0,
                            description="branch-and-bound nodes of the packing ILP per pipeline (0 skips it)")
    ilp_solver: SolverName = SolverName.CBC
    time_limit_s: float | None = within(limits.ILP_TIME_LIMIT_S, default=None,
                                        description="safety stop of the packing ILPs, seconds")
    alignment: int = within(limits.ALIGNMENT, default=1)
    oversize: OversizePolicy = OversizePolicy.ERROR
    synthesise: Synthesise = Field(default=Synthesise.PROPOSAL,
                                   description="make a strategy for the step from the proposal's schemes, the "
                                               "scheme space's (needs scheme_space), or never (off)")
    synthesis_evaluations: int = within(limits.SYNTHESIS_EVALUATIONS, default=SynthesisOptions.evaluations,
                                       description="strategies the dispatcher may plan while synthesising")
    scheme_space: dict[str, Any] | None = Field(default=None,
                                                description="the scheme space the proposal was made from "
                                                            "(synthesise=space)")


class StepPlanRequest(DispatchRequest):
    lengths: list[Length] = Field(min_length=1, description="the global batch: one length per sequence")


class SampleBody(Body):
    id: StrictStr | StrictInt = Field(description="the sample's id, as the runtime knows it")
    length: Length


class StepSamplesBody(Body):
    samples: list[SampleBody] = Field(min_length=1, description="one global batch: its samples")


class StepAssignmentsRequest(DispatchRequest):
    steps: list[StepSamplesBody] = Field(min_length=1, max_length=int(limits.SAMPLED_STEPS.maximum),
                                         description="the steps to plan, in order")
    single_strategy: bool = Field(default=False,
                                  description="run every step on one strategy of the proposal (the one predicted "
                                              "fastest over the steps), none synthesised: for runtimes that cannot "
                                              "switch strategies; leave synthesise out")


class SyntheticLengthsRequest(Body):
    """A synthetic long tail (:mod:`hydraulis.data.synth`): a lognormal body with a Pareto tail."""

    docs: int = within(limits.LENGTHS, description="how many document lengths to draw")
    seed: int = within(limits.SEED, default=0)
    body_mu: float = within(limits.LOG_LENGTH, default=LongTail.body_mu,
                            description="μ of the lognormal body: its median is e^μ tokens")
    body_sigma: float = within(limits.LOG_SPREAD, default=LongTail.body_sigma, description="σ of the lognormal body")
    tail_start: int = within(limits.LENGTH, default=LongTail.tail_start,
                             description="where the Pareto tail starts, in tokens")
    tail_alpha: float = within(limits.TAIL_INDEX, default=LongTail.tail_alpha,
                               description="index α of the tail: P(s > x) = (tail_start/x)^α")
    tail_share: float = within(limits.SHARE, default=LongTail.tail_share,
                               description="probability that a document comes from the tail")
    max_len: int = within(limits.LENGTH, default=LongTail.max_len, description="every length is capped here")

    def shape(self) -> LongTail:
        return LongTail(self.body_mu, self.body_sigma, self.tail_start, self.tail_alpha, self.tail_share, self.max_len)


class StepComparisonRequest(Body):
    scheme_space: dict[str, Any] = Field(description="the scheme space the proposal was made from")
    proposal: dict[str, Any] = Field(description="a proposal document (POST /v1/proposals, hydraulis propose)")
    lengths: list[Length] | None = Field(default=None, description="document lengths to draw the step from "
                                                                   "(give this or histogram)")
    histogram: Histogram | None = Field(default=None, description="document counts per length")
    seed: int = within(limits.SEED, default=0, description="draws the step's documents")


class FusedScheduleRequest(Body):
    problem: dict[str, Any] = Field(description="a fused problem document (hydraulis fuse --problem)")
    time_limit_s: float | None = within(limits.TIME_LIMIT_S, default=None,
                                        description="search seconds (default: the service's)")
    seed: int = within(limits.SEED, default=0)
    memory_limit: float | None = within(limits.MEMORY, default=None,
                                        description="hard limit on any device's memory")


class MemoryRequest(Body):
    """Every rank's memory under a strategy (``hydraulis memory``), beside the cost model's prediction."""

    model: str = Field(description="model preset, see GET /v1/presets")
    strategy: str = Field(max_length=4096, description="strategy SPEC, e.g. 1,8,1x8 or 4,8,1x16+1,8,1x64")
    devices: int = within(limits.DEVICES)
    devices_per_node: int = within(limits.DEVICES_PER_NODE, default=8)
    device: str = Field(default="h100-80g", description="device preset of the prediction and of the default tokens")
    optimizer_layout: LayoutBody | None = Field(default=None,
                                                description="optimizer layout (default: ZeRO-1 over all devices)")
    tokens: int | None = within(limits.MAX_SEQ_LEN, default=None,
                                description="tokens of a micro-batch (default: the longest sequence each "
                                            "scheme holds on the device)")
