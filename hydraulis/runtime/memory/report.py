"""``hydraulis memory``: every rank's bytes under a strategy, from its own objects on the meta device.

The details: :func:`memory_report`."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from hydraulis import __version__
from hydraulis.base.errors import require
from hydraulis.base.presets import device_preset
from hydraulis.base.types import Cluster, ModelSpec, Provenance, Scheme, SchemeSpace, SpaceSource, TimeCoefficients
from hydraulis.cost.memory import StagePlace, activation_curve, device_memory, scheme_capacities
from hydraulis.job.config import RuntimeOptions
from hydraulis.job.memory_report import GroupMemory, MemoryConfig, MemoryReport, RankMemory, capacity_bytes
from hydraulis.job.staged_profile import analytic_profile_of
from hydraulis.job.strategy_spec import parse_strategy
from hydraulis.profiler.analytic import analytic_memory_model
from hydraulis.profiler.cluster import group_cluster
from hydraulis.runtime.launch import DTYPES
from hydraulis.runtime.model.decoder import StageModel, layer_recompute
from hydraulis.runtime.optimizer.master import OptimizerShard
from hydraulis.runtime.optimizer.routes import Route, RoutePlan, route_plan
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.rank_map import RankMap, RankPlace
from hydraulis.sharding.activations import stage_activation_bytes
from hydraulis.sharding.kinds import OptimizerKind, ReduceDtype
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.pipeline import PipelineSplit, StrategySplit
from hydraulis.sharding.states import DTYPE_BYTES, device_precision
from hydraulis.sharding.step_memory import communicator_bytes, communicator_peers, exchange_bytes

META = torch.device("meta")


@dataclass(frozen=True)
class Judge:
    """The device a rank is judged on: its device group ("" without a cluster), device preset
    and the analytic space of the strategy's schemes there."""

    group: str
    device: str
    space: SchemeSpace


def memory_report(config: MemoryConfig, space: SchemeSpace | None = None) -> MemoryReport:
    """Steps 1–4 below; ``space`` (e.g. profiled on the device) replaces the analytic space of the
    prediction (without a cluster description).

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
       of the runtime's accounting (:mod:`.activations`) for micro-batches of ``T`` tokens (the loss
       in chunks, K/V repeated, as configured), the libraries' workspaces of the device kind, the
       largest parameter's gradient and the route's exchange buffers (:mod:`.step_memory`);
    4. beside each, the cost model's prediction for that device (:func:`hydraulis.cost.memory.device_memory`)
       on the given scheme space, else an analytic one of the device kind.

    A staged pipeline (design §9.2) builds each stage with its own tp and layers. With a cluster
    description (``--cluster``, :mod:`hydraulis.base.cluster`), the ranks are placed as the runtime places
    them (:func:`hydraulis.base.placement.stage_offsets`: each stage's block inside the rank range of its
    ``@GROUP``, the cluster's first group for a stage without one and for ordinary pipelines), and
    every rank is judged on the device of the group whose range holds it (idle ranks too) — with
    that device's precision, analytic space and capacity; the report adds per group the ranks, their
    largest total and whether it fits; ``T`` defaults to the longest micro-batch every rank of the
    pipeline holds on its own device. A strategy needing more devices of a group than the cluster
    has is refused, naming the group.

    ``T`` defaults to the longest sequence the cost model lets the pipeline's scheme hold on that
    device, so ``total`` is what a step of such micro-batches needs: what the caching allocator
    holds at the step's peak (``torch.cuda.max_memory_allocated``). Neither side counts what the
    process holds outside the allocator (CUDA context, kernels, communicators: the device's
    ``runtime_overhead_bytes``) or the allocator's fragmentation (its ``safety_margin_bytes``). The
    precision is the runtime's automatic one on the device kind (bf16 on an accelerator, fp32 on
    ``cpu``), the optimizer Adam.

    Worked example: Llama-70B under ``1,8,4x32`` on 1,024 devices has 1,024 ranks but 32 classes
    (4 stages × 8 tp ranks, every rank owning a buffer of the one optimizer stage).
    """
    require(space is None or config.cluster is None, "space", "given", "is for one device kind: give no cluster")
    if space is not None:
        require(space.model == config.model, "space.model", space.model.name, f"differs from {config.model.name}")
    model, layout = config.model, config.layout
    strategy = parse_strategy(config.strategy, model, lambda scheme: TimeCoefficients(0.0, 0.0, 0.0), 1)
    require(strategy.devices <= config.devices, "strategy", config.strategy,
            f"uses {strategy.devices} devices, more than devices = {config.devices}")
    placement = OptimizerOwnership(model, layout, config.devices)
    rank_map = RankMap(strategy.pipelines, config.devices, config.cluster.rank_ranges() if config.cluster else ())
    judges = _judges(config, strategy, rank_map, space)
    classes: dict[tuple, list[int]] = {}
    for rank in range(config.devices):
        classes.setdefault((judges[rank].group, *_class(rank_map, placement, rank)), []).append(rank)
    tokens = (_longest_held(config, judges, placement, rank_map, list(classes.values()))
              if config.cluster and config.tokens is None
              else _tokens(config, judges[0].space, strategy))
    routes = {members[0]: route_plan(placement, rank_map, members[0]) for members in classes.values()}
    local = all(route.local for route in routes.values())
    ranks: list[RankMemory] = [None] * config.devices
    for members in classes.values():
        first = _rank_memory(config, judges[members[0]], placement, routes[members[0]], rank_map, local, tokens)
        for rank in members:
            place = rank_map.place(rank)
            ranks[rank] = dataclasses.replace(first, rank=rank, pipeline=None if place is None else place.pipeline)
    return MemoryReport(config, tuple(ranks), tokens, tuple(tuple(members) for members in classes.values()),
                        _group_memory(config, judges, ranks))


def _judges(config: MemoryConfig, strategy: StrategySplit, rank_map: RankMap,
            space: SchemeSpace | None) -> list[Judge]:
    """Every rank's :class:`Judge`: with a cluster, that of the group whose rank range holds it;
    else ``space``, or the analytic space of ``config.device``."""
    cluster = config.cluster
    if cluster is None:
        device = device_preset(config.device)
        judge = Judge("", config.device, space or _analytic_space(
            config.model, strategy, device.name, Cluster(config.devices, config.devices_per_node, device.name)))
        return [judge] * config.devices
    names = [group.name for group in cluster.rank_ranges() for _ in range(group.size)]
    judges = {group.name: Judge(group.name, group.device, _analytic_space(config.model, strategy, group.device,
                                                                          group_cluster(group)))
              for group in cluster.groups}
    return [judges[name] for name in names]


def _longest_held(config: MemoryConfig, judges: list[Judge], placement: OptimizerOwnership, rank_map: RankMap,
                  classes: list[list[int]]) -> tuple[int, ...]:
    """Each pipeline's longest micro-batch that every one of its ranks holds on its own device by
    the cost model, the most tokens ``T`` whose activations ``A(T)`` fit in ``capacity − states −
    workspaces − g_max`` (:func:`~hydraulis.cost.memory.activation_curve`; 0 when the exchanges' buffers exceed what is left), computed once per class."""
    longest = [math.inf] * len(rank_map.pipelines)
    for members in classes:
        rank, place = members[0], rank_map.place(members[0])
        if place is None:
            continue
        judge, owner = judges[rank], placement.place(rank)
        pipeline = rank_map.pipelines[place.pipeline]
        running = StagePlace(pipeline.scheme, pipeline.stage_layers, place.stage)
        fixed = device_memory(judge.space, config.layout, None if owner is None else owner.stage, running, 0,
                              device_preset(judge.device).workspace_bytes)
        curve = activation_curve(config.model, judge.space.profile(pipeline.scheme), pipeline, place.stage,
                                 DTYPE_BYTES[device_precision(judge.device)], config.loss_chunk, config.repeat_kv)
        outside = _communicator_bytes(config, judge, pipeline.scheme, place.stage)
        free = capacity_bytes(judge.device) - outside - fixed.states - fixed.workspace
        held = 0 if fixed.exchange > free else curve.longest(free)
        for pipeline in {rank_map.place(member).pipeline for member in members}:
            longest[pipeline] = min(longest[pipeline], held)
    return tuple(longest)


def _group_memory(config: MemoryConfig, judges: list[Judge], ranks: list[RankMemory]) -> tuple[GroupMemory, ...]:
    if config.cluster is None:
        return ()
    groups = []
    for group in config.cluster.groups:
        mine = [rank for rank in ranks if judges[rank.rank].group == group.name]
        if mine:
            groups.append(GroupMemory(group.name, group.device, tuple(r.rank for r in mine), capacity_bytes(group.device),
                                      max(r.total_bytes + r.communicator_bytes for r in mine),
                                      round(max(r.predicted.total + r.predicted.communicators for r in mine))))
    return tuple(groups)


def _rank_memory(config: MemoryConfig, judge: Judge, placement: OptimizerOwnership, route: RoutePlan,
                 rank_map: RankMap, local: bool, tokens: tuple[int, ...]) -> RankMemory:
    """Step 3 for ``route``'s rank: its objects on the meta device, its activations, the
    prediction; ``local``: every rank's route is (one owner: no exchange, and the main gradients
    are views of the buffer's fp32 gradient where :meth:`~hydraulis.runtime.optimizer.routes.Route.aliases`
    finds every shard one run of it, as the runtime does)."""
    model, space, rank = config.model, judge.space, route.rank
    precision = device_precision(judge.device)
    options = RuntimeOptions(precision=precision, optimizer=OptimizerKind.ADAM)
    buffer = OptimizerShard(placement, rank, options, META, initialise=False)
    owner = placement.place(rank)
    place = rank_map.place(rank)
    dtype = DTYPES[precision]
    compute_bytes = torch.finfo(dtype).bits // 8
    weights = grads = activations = largest = 0
    workspace = 0
    running = None
    if place is not None:
        workspace = device_preset(judge.device).workspace_bytes
        pipeline = rank_map.pipelines[place.pipeline]
        params = list(_stage_model(model, pipeline, place, dtype, config.loss_chunk).parameters())
        weights = sum(_bytes(p) for p in params)
        aliased = local and dtype != torch.float32 and Route(route, None).aliases(buffer.grad) is not None
        grads = 0 if aliased else sum(_bytes(grad) for grad in gradient_buffers(params))
        largest = max(_bytes(p) for p in params)
        layers = tuple(layer_recompute(pipeline, place.stage).values())
        activations = stage_activation_bytes(model, pipeline.scheme, layers, place.stage, tokens[place.pipeline],
                                             compute_bytes, config.loss_chunk, config.repeat_kv)
        running = StagePlace(pipeline.scheme, pipeline.stage_layers, place.stage)
    exchange = 0 if local else _exchange_bytes(route, compute_bytes, ReduceDtype.AUTO.element_bytes(judge.device))
    predicted = device_memory(space, config.layout, None if owner is None else owner.stage, running,
                              0 if place is None else tokens[place.pipeline], workspace, config.loss_chunk,
                              config.repeat_kv)
    return RankMemory(rank, None if place is None else place.pipeline, None if place is None else place.stage,
                      weights, grads, buffer.nbytes, route.nbytes, activations, predicted, workspace + largest, exchange,
                      _communicator_bytes(config, judge, None if running is None else running.scheme,
                                          0 if place is None else place.stage))


def _communicator_bytes(config: MemoryConfig, judge: Judge, scheme: Scheme | None, stage: int) -> int:
    """The communicators' buffers of a rank of ``stage`` of ``scheme`` (None: idle) on the judge's
    device (:func:`~hydraulis.sharding.step_memory.communicator_bytes`)."""
    peers = communicator_peers(scheme, stage, config.devices)
    return communicator_bytes(peers, device_preset(judge.device).communicator_peer_bytes)


def _exchange_bytes(route: RoutePlan, compute_bytes: int, reduce_bytes: int) -> int:
    """The exchanges' buffers of ``route`` in flight (:func:`~hydraulis.sharding.step_memory.exchange_bytes`):
    the weights its shards receive, the gradients its buffer receives."""
    held = sum(sum(route.sent(False, bucket)) for bucket in range(route.buckets))
    received = sum(sum(route.received(True, bucket)) for bucket in range(route.buckets))
    return exchange_bytes(held, received, compute_bytes, reduce_bytes)


def gradient_buffers(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """The gradients a step accumulates into: fp32, one per parameter (``.grad`` in fp32, else
    the fp32 main buffers of :mod:`hydraulis.runtime.gradients`)."""
    return [torch.empty(param.shape, dtype=torch.float32, device=param.device) for param in params]


def _stage_model(model: ModelSpec, pipeline: PipelineSplit, place: RankPlace, dtype: torch.dtype,
                 loss_chunk: int) -> StageModel:
    scheme = pipeline.scheme
    return StageModel(model, pipeline, place.stage, ParallelGroup(None, scheme.stage_tp(place.stage), place.tp_rank),
                      ParallelGroup(None, scheme.cp, place.cp_rank), dtype, META, loss_chunk=loss_chunk)


def _class(rank_map: RankMap, placement: OptimizerOwnership, rank: int) -> tuple:
    place, owner = rank_map.place(rank), placement.place(rank)
    owned = None if owner is None else (owner.stage, owner.tp_rank)
    if place is None:
        return None, owned
    return rank_map.pipelines[place.pipeline], place.stage, place.cp_rank, place.tp_rank, owned


def _analytic_space(model: ModelSpec, strategy: StrategySplit, device_name: str, cluster: Cluster) -> SchemeSpace:
    """The analytic scheme space of the strategy's schemes on ``device_name`` in ``cluster``."""
    device = device_preset(device_name)
    schemes = tuple(dict.fromkeys(p.scheme for p in strategy.pipelines))
    return SchemeSpace(model=model, cluster=cluster, memory=analytic_memory_model(model, device),
                       profiles=tuple(analytic_profile_of(model, device, cluster, s) for s in schemes),
                       provenance=Provenance(SpaceSource.ANALYTIC, device.name, "", __version__))


def _tokens(config: MemoryConfig, space: SchemeSpace, strategy: StrategySplit) -> tuple[int, ...]:
    """Each pipeline's micro-batch tokens: ``config.tokens``, else its scheme's longest sequence."""
    if config.tokens is not None:
        return (config.tokens,) * len(strategy.pipelines)
    longest: dict[Scheme, int] = {c.profile.scheme: c.max_seq_len
                                  for c in scheme_capacities(space, config.layout, config.loss_chunk)}
    return tuple(longest[p.scheme] for p in strategy.pipelines)


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()
