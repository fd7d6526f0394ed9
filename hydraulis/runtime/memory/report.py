"""``hydraulis memory``: every rank's bytes under a strategy, from its own objects on the meta device.

Recipe (:func:`memory_report`):

1. parse the strategy SPEC for the model, check that it fits the devices and that the
   optimizer layout (default ZeRO-1 over all devices, ``N,1,1``) divides them;
2. group the ranks into **classes** — same pipeline layout, stage, cp rank and tp rank, and
   same optimizer stage and tp rank of the buffer they own (or idle / owning nothing) — and
   compute each class once, on its first rank (its other ranks' buffers and routes differ by
   an element or a block);
3. per class, build what the runtime builds, on the ``meta`` device (nothing allocated, no
   process group): the rank's :class:`~hydraulis.runtime.model.decoder.StageModel` (weights),
   its gradient buffers, its :class:`~hydraulis.runtime.optimizer.master.OptimizerShard` and its
   :class:`~hydraulis.runtime.optimizer.routes.RoutePlan` (host memory); add the activation bytes
   of the runtime's accounting (:mod:`.activations`) for micro-batches of ``T`` tokens;
4. beside each, the cost model's prediction for that device (:func:`hydraulis.cost.memory.device_memory`)
   on an analytic scheme space of the device kind.

``T`` defaults to the longest sequence the cost model lets the pipeline's scheme hold on that
device, so ``total`` is what a step of such micro-batches needs. Neither side counts the
runtime's fixed overhead (CUDA context, communicator buffers) or the safety margin. The
precision is the runtime's automatic one on the device kind (bf16 on an accelerator, fp32 on
``cpu``), the optimizer Adam.

Worked example: Llama-70B under ``1,8,4x32`` on 1,024 devices has 1,024 ranks but 32 classes
(4 stages × 8 tp ranks, every rank owning a buffer of the one optimizer stage).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from hydraulis import __version__
from hydraulis.cost.memory import DeviceMemory, StagePlace, device_memory, scheme_capacities
from hydraulis.errors import require, require_int
from hydraulis.presets import device_preset
from hydraulis.profiler.analytic import analytic_memory_model
from hydraulis.runtime.config import OptimizerKind, RuntimeOptions
from hydraulis.runtime.layout import PipelineLayout, StrategyLayout
from hydraulis.runtime.launch import DTYPES
from hydraulis.runtime.memory.activations import stage_activation_bytes
from hydraulis.runtime.memory.states import device_precision
from hydraulis.runtime.model.decoder import StageModel, layer_recompute
from hydraulis.runtime.optimizer.master import OptimizerShard
from hydraulis.runtime.optimizer.placement import OptimizerPlacement
from hydraulis.runtime.optimizer.routes import route_plan
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.rank_map import RankMap, RankPlace
from hydraulis.runtime.staged_profile import analytic_profile_of
from hydraulis.runtime.strategy_spec import parse_strategy
from hydraulis.types import Cluster, ModelSpec, OptimizerLayout, Provenance, Scheme, SchemeSpace, SpaceSource, TimeCoefficients

META = torch.device("meta")


@dataclass(frozen=True)
class MemoryConfig:
    """What to account: ``model`` under the strategy SPEC ``strategy`` on ``devices`` devices of
    the preset kind ``device`` (``devices_per_node`` per node), the optimizer layout (None:
    ``devices,1,1``), micro-batches of ``tokens`` tokens (None: each scheme's longest sequence)."""

    model: ModelSpec
    strategy: str
    devices: int
    device: str = "h100-80g"
    devices_per_node: int = 8
    optimizer_layout: OptimizerLayout | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        require_int(self.devices, "devices", minimum=1)
        require_int(self.devices_per_node, "devices_per_node", minimum=1)
        if self.tokens is not None:
            require_int(self.tokens, "tokens", minimum=1)
        device_preset(self.device)

    @property
    def layout(self) -> OptimizerLayout:
        return self.optimizer_layout or OptimizerLayout(self.devices, 1, 1)


@dataclass(frozen=True)
class RankMemory:
    """One rank's bytes (module docstring); ``pipeline`` and ``stage`` None when the strategy
    leaves it idle; ``predicted`` the cost model's."""

    rank: int
    pipeline: int | None
    stage: int | None
    weights_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    route_bytes: int
    activation_bytes: int
    predicted: DeviceMemory

    @property
    def states_bytes(self) -> int:
        return self.weights_bytes + self.grad_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> int:
        return self.states_bytes + self.route_bytes + self.activation_bytes


@dataclass(frozen=True)
class MemoryReport:
    """Every rank's memory, the micro-batch tokens per pipeline, and the ranks of each class
    (step 2 of the module docstring) in order of their first rank."""

    config: MemoryConfig
    ranks: tuple[RankMemory, ...]
    tokens: tuple[int, ...]
    classes: tuple[tuple[int, ...], ...]

    @property
    def max_total_bytes(self) -> int:
        return max(rank.total_bytes for rank in self.ranks)

    @property
    def max_predicted_bytes(self) -> int:
        return round(max(rank.predicted.total for rank in self.ranks))

    @property
    def device_memory_bytes(self) -> int:
        return device_preset(self.config.device).memory_bytes

    @property
    def capacity_bytes(self) -> int:
        """What a device of ``config.device`` leaves to states and activations: its memory less the
        runtime's fixed overhead and the safety margin (neither total counts them)."""
        device = device_preset(self.config.device)
        return device.memory_bytes - device.runtime_overhead_bytes - device.safety_margin_bytes


def memory_report(config: MemoryConfig) -> MemoryReport:
    """Steps 1–4 of the module docstring."""
    model, layout = config.model, config.layout
    strategy = parse_strategy(config.strategy, model, lambda scheme: TimeCoefficients(0.0, 0.0, 0.0), 1)
    require(strategy.devices <= config.devices, "strategy", config.strategy,
            f"uses {strategy.devices} devices, more than devices = {config.devices}")
    placement = OptimizerPlacement(model, layout, config.devices)
    rank_map = RankMap(strategy.pipelines, config.devices)
    space = _analytic_space(config, strategy)
    tokens = _tokens(config, space, strategy)
    classes: dict[tuple, list[int]] = {}
    for rank in range(config.devices):
        classes.setdefault(_class(rank_map, placement, rank), []).append(rank)
    ranks: list[RankMemory] = [None] * config.devices
    for members in classes.values():
        first = _rank_memory(config, space, placement, rank_map, members[0], tokens)
        for rank in members:
            place = rank_map.place(rank)
            ranks[rank] = dataclasses.replace(first, rank=rank, pipeline=None if place is None else place.pipeline)
    return MemoryReport(config, tuple(ranks), tokens, tuple(tuple(members) for members in classes.values()))


def _rank_memory(config: MemoryConfig, space: SchemeSpace, placement: OptimizerPlacement, rank_map: RankMap,
                 rank: int, tokens: tuple[int, ...]) -> RankMemory:
    """Step 3 for ``rank``: its objects on the meta device, its activations, the prediction."""
    model = config.model
    precision = device_precision(config.device)
    options = RuntimeOptions(precision=precision, optimizer=OptimizerKind.ADAM)
    buffer = OptimizerShard(placement, rank, options, META, initialise=False)
    route = route_plan(placement, rank_map, rank)
    owner = placement.place(rank)
    place = rank_map.place(rank)
    weights = grads = activations = 0
    running = None
    if place is not None:
        pipeline = rank_map.pipelines[place.pipeline]
        params = list(_stage_model(model, pipeline, place, DTYPES[precision]).parameters())
        weights = sum(_bytes(p) for p in params)
        grads = sum(_bytes(grad) for grad in gradient_buffers(params))
        layers = tuple(layer_recompute(pipeline, place.stage).values())
        activations = stage_activation_bytes(model, pipeline.scheme, layers, place.stage, tokens[place.pipeline],
                                             torch.finfo(DTYPES[precision]).bits // 8)
        running = StagePlace(pipeline.scheme, pipeline.stage_layers, place.stage)
    predicted = device_memory(space, config.layout, None if owner is None else owner.stage, running,
                              0 if place is None else tokens[place.pipeline])
    return RankMemory(rank, None if place is None else place.pipeline, None if place is None else place.stage,
                      weights, grads, buffer.nbytes, route.nbytes, activations, predicted)


def gradient_buffers(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """The gradients a step accumulates into, as autograd allocates them (like each parameter)."""
    return [torch.empty(param.shape, dtype=param.dtype, device=param.device) for param in params]


def _stage_model(model: ModelSpec, pipeline: PipelineLayout, place: RankPlace, dtype: torch.dtype) -> StageModel:
    scheme = pipeline.scheme
    return StageModel(model, pipeline, place.stage, ParallelGroup(None, scheme.stage_tp(place.stage), place.tp_rank),
                      ParallelGroup(None, scheme.cp, place.cp_rank), dtype, META)


def _class(rank_map: RankMap, placement: OptimizerPlacement, rank: int) -> tuple:
    place, owner = rank_map.place(rank), placement.place(rank)
    owned = None if owner is None else (owner.stage, owner.tp_rank)
    if place is None:
        return None, owned
    return rank_map.pipelines[place.pipeline], place.stage, place.cp_rank, place.tp_rank, owned


def _analytic_space(config: MemoryConfig, strategy: StrategyLayout) -> SchemeSpace:
    """The analytic scheme space of the strategy's schemes on ``config.device``."""
    device = device_preset(config.device)
    cluster = Cluster(config.devices, config.devices_per_node, device.name)
    schemes = tuple(dict.fromkeys(p.scheme for p in strategy.pipelines))
    return SchemeSpace(model=config.model, cluster=cluster, memory=analytic_memory_model(config.model, device),
                       profiles=tuple(analytic_profile_of(config.model, device, cluster, s) for s in schemes),
                       provenance=Provenance(SpaceSource.ANALYTIC, device.name, "", __version__))


def _tokens(config: MemoryConfig, space: SchemeSpace, strategy: StrategyLayout) -> tuple[int, ...]:
    """Each pipeline's micro-batch tokens: ``config.tokens``, else its scheme's longest sequence."""
    if config.tokens is not None:
        return (config.tokens,) * len(strategy.pipelines)
    longest: dict[Scheme, int] = {c.profile.scheme: c.max_seq_len for c in scheme_capacities(space, config.layout)}
    return tuple(longest[p.scheme] for p in strategy.pipelines)


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()
