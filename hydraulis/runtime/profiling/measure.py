"""Measuring points on the runtime's own layers, one process per device (the per-rank job).

For a point of scheme ``(cp, tp, pp)`` the first ``r·cp·tp·pp`` ranks form ``r`` pipelines of it
(``r``: as many as fill the node, or 1), each rank building its stage; one **run** is the
runtime's 1F1B over ``v ≥ pp`` copies of the point's packed micro-batch, so every stage reaches
its steady state. A micro-batch's **sample** is its slowest rank's forward + backward; the
point's time is the sweep's :class:`~hydraulis.profiler.sweep.Statistic` (by default the minimum)
of the ``v·repeats`` samples. A point with a ``stage`` measures that stage alone, a
:class:`~.loopback.LoopbackLink` standing in for its neighbours. Whole pipelines also give the
hand-off ``d`` (:func:`hydraulis.profiler.handoff.point_handoff`); a job whose ``reduction`` is
set then measures it (:mod:`.reduction`). How noise, memory and out-of-memory points are
handled: :func:`measure_job`."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from hydraulis.artifacts.measurements import MeasurementCache
from hydraulis.base.types import MicroBatch, Scheme
from hydraulis.job.config import RuntimeOptions
from hydraulis.profiler.handoff import point_handoff
from hydraulis.profiler.measurement import Clock, MeasureJob, Measurement, MeasureStatus, Statistic
from hydraulis.profiler.sweep import Interleave, SweepPoint, points_by_scheme
from hydraulis.runtime.launch import RankContext, run_job
from hydraulis.runtime.model.attention import attention_kernel
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import PackedMicroBatch, pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.pipeline import StageLink, StageWork, run_1f1b
from hydraulis.runtime.profiling.loopback import LoopbackLink
from hydraulis.runtime.profiling.reduction import measure_reduction
from hydraulis.runtime.rank_map import GroupCache, ProcessGroups, RankMap, RankPlace
from hydraulis.sharding.pipeline import PipelineSplit

INIT_STD = 0.02
CHUNK_POINTS = 16
"""Most points of one stage model run in a row within a round (module docstring)."""
MIN_RUN_MS = 50.0
"""The shortest timed run once calibrated (module docstring)."""
MIN_MICRO_BATCHES = 2
"""The fewest micro-batches of a timed run: a run's first follows another point's (colder
caches), so the minimum needs a second (module docstring)."""
OUT_OF_MEMORY = (torch.cuda.OutOfMemoryError, MemoryError)


class PointOutOfMemory(RuntimeError):
    """A point ran out of memory on this rank (recorded in the cache before raising)."""


@dataclass(frozen=True)
class StageUnderTest:
    """This rank's stage of the pipeline being measured; ``link`` is None for a stage measured
    alone (:class:`~.loopback.LoopbackLink` stands in for its neighbours), which runs as a pipeline of
    ``stages = 1`` (one micro-batch in flight) at ``index`` 0."""

    model: StageModel
    link: StageLink | None
    place: RankPlace
    scheme: Scheme
    cp: ParallelGroup
    stages: int
    index: int


def measure_job(context: RankContext, job: MeasureJob, options: RuntimeOptions) -> None:
    """The per-rank body: every point of ``job``, then its reduction (module docstring).

    Noise on a shared machine is fought three ways:

    * **enough samples, warm**: the warm-up round also calibrates ``v`` so that a run lasts at
      least :data:`MIN_RUN_MS` and holds at least :data:`MIN_MICRO_BATCHES` (a run's first
      micro-batch follows another point's, with colder caches); a stage built anew runs one
      micro-batch untimed first (a new model's first call is slower still);
    * **interleaving**: the points of one scheme's ranks (for a stage measured alone: of one
      ``(cp, tp, sp)``) — or, with ``--interleave sweep`` (the default on CPU), every point of the
      job — are measured in rounds, each running every point once (in chunks of up to
      :data:`CHUNK_POINTS` points per stage model, built anew from the seed each round), so a burst
      of other work spoils one run of several points rather than every run of one point; they are
      appended to the cache when their last round ends;
    * the **minimum** of the samples: other work only ever adds time to a sample (preemption, the
      caches and memory bandwidth it takes), so the fastest sample is the least disturbed one
      (docs/results.md has the figures).

    **Activation memory** of the most loaded rank: on CUDA the allocator's peak during the last run
    minus what was allocated before it; on the CPU (an estimate: its allocator keeps no peak) the
    bytes autograd saves in one forward (``saved_tensors_hooks``, each storage once, parameters
    excluded) times the ``pp − stage`` micro-batches 1F1B keeps in flight.

    **Out of memory**: the rank records the point as a capacity limit in the cache and ends the
    job; the profiler restarts the rest (:mod:`hydraulis.io.profile_run`). Rank 0 appends each
    finished point to the cache (:mod:`hydraulis.artifacts.measurements`).
    """
    cache = MeasurementCache(job.cache) if context.rank == 0 else None
    bar = tqdm(total=job.total, initial=job.done, disable=context.rank != 0, desc="profile", unit="point")
    groups_seen = GroupCache(context.new_group)
    chunks = []
    for scheme, points in points_by_scheme(job.points).items():
        replicas = job.settings.environment.replicas(scheme)
        rank_map = RankMap((PipelineSplit(scheme, (1,) * scheme.pp),) * replicas, context.world_size)
        groups = ProcessGroups.create(rank_map, context.rank, groups_seen)
        place = rank_map.place(context.rank)
        build = _no_stage if place is None else partial(_stage, job, context, rank_map, groups, place)
        stages = [list(group) for _, group in itertools.groupby(points, key=_stage_key)]
        chunks.append([Chunk(tuple(stage[first:first + CHUNK_POINTS]), build)
                       for stage in stages for first in range(0, len(stage), CHUNK_POINTS)])
    for group in round_groups(chunks, job.interleave):
        for measurement in _measure_in_rounds(group, context, job, bar):
            if cache is not None:
                cache.append(measurement, job.settings)
    bar.close()
    if job.reduction:
        reduction = measure_reduction(context, job.settings.model, options, job.reduction)
        if cache is not None:
            cache.append_reduction(reduction, job.settings)


@dataclass(frozen=True)
class Chunk:
    """Points run in a row on one stage model, which ``build`` makes for this rank (None: the
    rank is outside the points' pipelines)."""

    points: tuple[SweepPoint, ...]
    build: Callable[[SweepPoint], StageUnderTest | None]


def round_groups(chunks_by_scheme: list[list[Chunk]], interleave: Interleave) -> list[list[Chunk]]:
    """The chunks that share measuring rounds: each scheme's apart (``scheme``), or all of them
    together (``sweep``)."""
    if interleave is Interleave.SCHEME:
        return chunks_by_scheme
    return [[chunk for chunks in chunks_by_scheme for chunk in chunks]]


def _no_stage(point: SweepPoint) -> None:
    """A rank outside the scheme's pipelines runs no stage (it waits at the barriers)."""
    return None


def _stage_key(point: SweepPoint) -> tuple:
    """Points with one key run on the same stage model."""
    return (point.scheme, point.depth) if point.stage is None else (point.scheme, point.stage_layers, point.stage)


def _stage(job: MeasureJob, context: RankContext, rank_map: RankMap, groups: ProcessGroups, place: RankPlace,
           point: SweepPoint) -> StageUnderTest:
    """This rank's stage for ``point`` — of a pipeline of ``depth`` layers per stage, or the
    point's one stage alone — weights drawn like the runtime's (norms 1, matrices N(0, 0.02²))
    from a seed; the rank map's neighbours do not depend on the depth."""
    scheme = point.scheme
    alone = point.stage is not None
    layout = PipelineSplit(scheme, point.stage_layers if alone else (point.depth,) * scheme.pp)
    index = point.stage if alone else place.stage
    model = replace(job.settings.model, layers=layout.layers)
    stage_model = StageModel(model, layout, index, groups.tp, groups.cp, context.dtype, context.device)
    torch.manual_seed(job.seed)
    with torch.no_grad():
        for parameter in stage_model.parameters():
            if parameter.dim() == 1:
                parameter.fill_(1.0)
            else:
                parameter.normal_(0.0, INIT_STD)
    if alone:
        return StageUnderTest(stage_model, None, place, scheme, groups.cp, 1, 0)
    link = StageLink(rank_map.hand_off(place), context.device, context.dtype)
    return StageUnderTest(stage_model, link, place, scheme, groups.cp, scheme.pp, place.stage)


def _measure_in_rounds(group: list[Chunk], context: RankContext, job: MeasureJob, bar: tqdm) -> list[Measurement]:
    """Warm-up and timed rounds, each round running every point of every chunk once (a chunk's
    stage built anew from the seed each round and run once untimed, so that no sample holds a
    new model's first call), all ranks starting each run together; then every rank's timings
    and memory gathered (module docstring)."""
    rounds, warmup = job.settings.warmup + job.settings.repeats, job.settings.warmup
    cuda = context.device.type == "cuda"
    chunks = [chunk.points for chunk in group]
    in_flight = [1 if chunk[0].stage is not None else chunk[0].scheme.pp for chunk in chunks]
    micro_batches = [np.full(len(chunk), pp) for chunk, pp in zip(chunks, in_flight)]
    timings = [[[np.zeros((0, 2))] * rounds for _ in chunk] for chunk in chunks]
    memory = [np.zeros(len(chunk)) for chunk in chunks]
    spans = [np.zeros((len(chunk), rounds)) for chunk in chunks]
    stage_of = np.full(len(chunks), -1.0)
    wall_s = np.zeros(len(chunks))
    point = chunks[0][0]
    try:
        for run in range(rounds):
            for c, chunk in enumerate(chunks):
                started = time.perf_counter()
                where = "" if chunk[0].stage is None else f" stage {chunk[0].stage}"
                bar.set_postfix_str(f"round {run + 1}/{rounds} {chunk[0].scheme}{where} depth {chunk[0].depth} "
                                    f"{chunk[0].tokens}-{chunk[-1].tokens} tokens")
                stage = group[c].build(chunk[0])
                if stage is not None:
                    stage_of[c] = stage.index if stage.link is not None else -1
                    _run(stage, _pack(chunk[0], stage, context, job.seed), context, 1,
                         job.settings.environment.clock, track_memory=False)
                for i, point in enumerate(chunk):
                    batch = None if stage is None else _pack(point, stage, context, job.seed)
                    dist.barrier()
                    timings[c][i][run] = np.zeros((int(micro_batches[c][i]), 2))
                    if stage is not None:
                        last = cuda and run == rounds - 1
                        timings[c][i][run], peak, spans[c][i, run] = _run(
                            stage, batch, context, int(micro_batches[c][i]), job.settings.environment.clock,
                            track_memory=last)
                        memory[c][i] = peak if last else memory[c][i]
                if run == 0 and warmup > 0:
                    first = [t[0].sum(axis=1).mean() for t in timings[c]]
                    micro_batches[c] = _calibrated_micro_batches(first, in_flight[c], context)
                if run == rounds - 1:
                    if stage is not None and not cuda:
                        memory[c] = np.array([_saved_bytes_in_flight(stage, _pack(p, stage, context, job.seed))
                                              for p in chunk])
                    bar.update(len(chunk))
                wall_s[c] += time.perf_counter() - started
    except OUT_OF_MEMORY as error:
        MeasurementCache(job.cache).append(Measurement(point, MeasureStatus.OUT_OF_MEMORY), job.settings)
        raise PointOutOfMemory(f"{point.scheme} depth {point.depth}, {point.tokens} tokens: {error}") from None
    timed = [t.ravel() for chunk in timings for runs in chunk for t in runs[warmup:]]
    gathered = np.concatenate(timed + memory + [span[:, warmup:].ravel() for span in spans] + [stage_of])
    every = context.world.all_gather(torch.from_numpy(gathered).to(context.device))
    every = every.view(context.world_size, -1).cpu().numpy()
    found, start, held = [], 0, sum(t.size for t in timed)
    spanned, stages = held + sum(m.size for m in memory), every[:, -len(chunks):]
    wall = job.settings.environment.clock is Clock.WALL
    for c, chunk in enumerate(chunks):
        for i, p in enumerate(chunk):
            size = sum(t.size for t in timings[c][i][warmup:])
            samples = every[:, start:start + size].reshape(context.world_size, -1, 2)
            measurement = _summary(p, samples, every[:, held].max(), wall_s[c] / len(chunk), job.settings.statistic)
            if wall and p.stage is None and p.scheme.pp > 1:
                runs = every[:, spanned:spanned + rounds - warmup]
                measurement = replace(measurement, handoff_ms=point_handoff(samples, runs, stages[:, c], p.scheme.pp))
            found.append(measurement)
            start, held, spanned = start + size, held + 1, spanned + rounds - warmup
    return found


def _calibrated_micro_batches(warmup_ms: list[float], pp: int, context: RankContext) -> np.ndarray:
    """Micro-batches per run (at least ``pp`` and :data:`MIN_MICRO_BATCHES`) so that the slowest
    rank's run lasts about :data:`MIN_RUN_MS` (``warmup_ms``: each point's forward + backward
    per micro-batch in the warm-up run)."""
    mine = torch.tensor(warmup_ms, dtype=torch.float64, device=context.device)
    slowest = context.world.all_reduce(mine, dist.ReduceOp.MAX)
    per_micro_batch = np.maximum(slowest.cpu().numpy(), 1e-3)
    return np.maximum(max(pp, MIN_MICRO_BATCHES), np.ceil(MIN_RUN_MS / per_micro_batch)).astype(int)


def _summary(point: SweepPoint, timed: np.ndarray, activation_bytes: float, wall_s: float,
             statistic: Statistic) -> Measurement:
    """``timed[rank, sample] = (forward, backward)`` ms of every timed micro-batch: each
    sample's slowest rank, then ``statistic`` over the samples (module docstring)."""
    per_sample = timed.sum(axis=2)
    samples = per_sample.max(axis=0)
    chosen = statistic.index(samples)
    forward = timed[per_sample[:, chosen].argmax(), chosen, 0]
    return Measurement(point, MeasureStatus.OK, time_ms=float(samples[chosen]), forward_ms=float(forward),
                       activation_bytes=float(activation_bytes), samples_ms=tuple(float(v) for v in samples),
                       wall_s=wall_s)


def _pack(point: SweepPoint, stage: StageUnderTest, context: RankContext, seed: int) -> PackedMicroBatch:
    """The point's micro-batch of random tokens (the same on every rank), packed for this rank."""
    rng = np.random.default_rng([seed, *point.lengths])
    vocab = stage.model.model.vocab
    documents = [rng.integers(0, vocab, s + 1) for s in point.lengths]
    micro_batch = MicroBatch(tuple(range(len(point.lengths))), point.lengths)
    kernel = attention_kernel(context.device, context.dtype)
    return pack_micro_batch(documents, micro_batch, 1, stage.cp, context.device, kernel, stage.model.sequence_shards)


class _TimedStageWork(StageWork):
    """The runtime's stage work, timing each micro-batch's forward and backward call by ``clock``
    (``seconds[j] = (forward, backward)``)."""

    def __init__(self, model: StageModel, batch: PackedMicroBatch, micro_batches: int, clock: Clock) -> None:
        super().__init__(model, lambda j: batch, [batch.hidden_rows] * micro_batches, batch.tokens * micro_batches)
        self.clock = clock
        self.seconds = np.zeros((micro_batches, 2))

    def forward(self, j: int, received: torch.Tensor | None) -> torch.Tensor | None:
        start = self._now()
        out = super().forward(j, received)
        self.seconds[j, 0] = self._now() - start
        return out

    def backward(self, j: int, grad: torch.Tensor | None) -> torch.Tensor | None:
        start = self._now()
        out = super().backward(j, grad)
        self.seconds[j, 1] = self._now() - start
        return out

    def _now(self) -> float:
        if self.clock is Clock.CPU:
            return time.process_time()
        device = next(self.model.parameters()).device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()


def _run(stage: StageUnderTest, batch: PackedMicroBatch, context: RankContext, micro_batches: int, clock: Clock,
         track_memory: bool) -> tuple[np.ndarray, float]:
    """One 1F1B run of ``micro_batches`` copies of ``batch``: each micro-batch's forward and
    backward ms (rows), and on CUDA with ``track_memory`` the allocator's peak above the bytes
    allocated before."""
    stage.model.zero_grad(set_to_none=True)
    if track_memory:
        torch.cuda.synchronize(context.device)
        torch.cuda.reset_peak_memory_stats(context.device)
    before = torch.cuda.memory_allocated(context.device) if track_memory else 0
    work = _TimedStageWork(stage.model, batch, micro_batches, clock)
    link = stage.link or LoopbackLink(stage.model, context, batch.tokens)
    started = time.perf_counter()
    run_1f1b(work, link, micro_batches, stage.stages, stage.index)
    if context.device.type == "cuda":
        torch.cuda.synchronize(context.device)
    makespan_ms = (time.perf_counter() - started) * 1e3
    peak = torch.cuda.max_memory_allocated(context.device) - before if track_memory else 0
    return work.seconds * 1e3, float(peak), makespan_ms


def _saved_bytes_in_flight(stage: StageUnderTest | None, batch: PackedMicroBatch | None) -> float:
    """CPU estimate (module docstring): saved-for-backward bytes of one forward × in flight."""
    if stage is None:
        return 0.0
    model = stage.model
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    hidden = None if model.first else torch.randn(batch.hidden_rows, model.model.hidden, dtype=next(model.parameters()).dtype,
                                                  requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(hidden, batch)
    return float(sum(storages.values()) * (stage.stages - stage.index))


def run_measure_job(job: MeasureJob, processes: int, options: RuntimeOptions, log_level: str = "warning") -> None:
    """:func:`measure_job` on ``processes`` local processes (a :data:`hydraulis.io.profile_run.Runner`)."""
    run_job(measure_job, (job, options), options, nproc=processes, devices=processes, log_level=log_level)
