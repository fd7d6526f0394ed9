"""A training config resolved into what every rank needs (no torch here).

:func:`resolve_run` reads presets and files, parses every strategy SPEC or the proposal, loads
and tokenizes the corpus (or prepares synthetic documents) and reads the checkpoint to resume
from — in the launching process, before any rank starts, so bad input fails fast with a
:class:`~hydraulis.base.errors.HydraulisError` and the ranks need no file access of their own (but
for the checkpoint shards they read and write). Without a space, the strategies' step times are
predicted with the analytic model of the device the job runs on (:func:`timing_device`): the
preset of the detected GPU's name, or the ``cpu`` preset.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from hydraulis.artifacts import read_lengths, read_proposal, read_scheme_space
from hydraulis.artifacts.cluster import read_cluster
from hydraulis.base.cluster import ClusterDescription
from hydraulis.base.errors import require
from hydraulis.base.placement import stage_offsets
from hydraulis.base.presets import FALLBACK_GPU, device_preset, gpu_preset, model_preset
from hydraulis.base.types import DeviceSpec, ModelSpec, OptimizerLayout, PipelineModel, Proposal
from hydraulis.data.corpus import CorpusSource
from hydraulis.data.loader import LoaderConfig
from hydraulis.data.measure import measure_corpus
from hydraulis.data.tokenizer import TokenizerSpec
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import synthesis_options
from hydraulis.job.config import TrainConfig
from hydraulis.job.strategy_spec import parse_strategy, parse_strategy_spec, scheme_times
from hydraulis.runtime.checkpoint.hf_directory import HfDirectory, read_hf_directory
from hydraulis.runtime.checkpoint.resume import Resume, check_resumable, complete_checkpoints, find_checkpoint
from hydraulis.runtime.data import SyntheticCorpus, TrainingData, synthetic_lengths
from hydraulis.runtime.planning import Planning, spec_proposal
from hydraulis.sharding.kinds import ReduceDtype
from hydraulis.sharding.pipeline import StrategySplit, even_strategy_split

log = logging.getLogger(__name__)
DEFAULT_TOKEN_BUDGET = 256
DEFAULT_MAX_SEQ_LEN = 64
DEFAULT_CACHE = Path.home() / ".cache" / "hydraulis"


@dataclass(frozen=True)
class CheckpointPolicy:
    """Write a checkpoint under ``root`` after every ``every`` steps (0: none before the end)
    and after the last step, keeping the newest ``keep``; ``overwrite``: remove the checkpoints
    already there before the first."""

    root: str
    every: int
    keep: int = 2
    overwrite: bool = False

    def due(self, completed: int, last: int) -> bool:
        return completed == last or (self.every > 0 and completed % self.every == 0)


@dataclass(frozen=True)
class TrainingRun:
    """Model; the strategies a step may run (a plan's ``strategy_index`` indexes ``layouts``,
    unless the plan made a strategy for its step)
    and how steps are planned; the data; the step count to reach; the optimizer layout (None:
    ZeRO-1 over all ranks); checkpoints to write and the one to resume from, or the Hugging
    Face directory to start from; where rank 0 writes TensorBoard event files; the mixed cluster
    it runs on (None: the contiguous placement), whose devices are then its processes; the
    device preset of its devices (:func:`timing_device`: the peak its MFU is measured against
    and, without a space, what prices its SPECs)."""

    model: ModelSpec
    layouts: tuple[StrategySplit, ...]
    planning: Planning
    data: TrainingData
    steps: int
    optimizer_layout: OptimizerLayout | None = None
    checkpoint: CheckpointPolicy | None = None
    resume: Resume | None = None
    init_from: HfDirectory | None = None
    tensorboard_dir: str | None = None
    cluster: ClusterDescription | None = None
    device: DeviceSpec | None = None

    @property
    def devices(self) -> int:
        """The fewest processes that can run it (on a cluster: its devices)."""
        if self.cluster is not None:
            return self.cluster.devices
        layout = self.optimizer_layout.devices if self.optimizer_layout else 1
        return max([layout] + [strategy.devices for strategy in self.layouts])

    @property
    def first_step(self) -> int:
        """The step it starts with: its checkpoint's (at most ``steps``: a job restarted after its
        last checkpoint has nothing left to do), else 0."""
        return min(self.resume.manifest.step, self.steps) if self.resume else 0


def resolve_run(config: TrainConfig, gpu_name: str | None = None) -> TrainingRun:
    """Read presets and files, parse every strategy, prepare the data and the resume point;
    ``gpu_name``: the CUDA device the job runs on (None: the CPU), :func:`timing_device`."""
    device = timing_device(gpu_name)
    init_from = read_hf_directory(config.init_from) if config.init_from else None
    resume = _resume_point(config)
    if init_from:
        model = init_from.model
    else:
        model = model_preset(config.model) if config.model else resume.manifest.model
    options = DispatchOptions(seed=config.runtime.seed)
    cluster = read_cluster(config.cluster_file) if config.cluster_file else None
    if config.proposal_file:
        proposal = read_proposal(config.proposal_file)
        require(proposal.model.matches(model), "proposal.model", proposal.model.name,
                f"differs from the trained model {model.name} (the plans assume the proposal's model's shape)")
        _check_loss_chunk(proposal, config.runtime.loss_chunk_tokens)
        token_budget = config.token_budget or proposal.token_budget
        max_seq_len = config.max_seq_len or proposal.max_seq_len
        layouts = tuple(even_strategy_split(p.strategy, model) for p in proposal.strategies)
        space = read_scheme_space(config.space_file) if config.space_file else None
        synthesis = synthesis_options(config.synthesise, config.synthesis_evaluations, proposal, space, "--space")
        planning = Planning((proposal,), False, config.method, options, config.planner_url, synthesis, space)
        optimizer_layout = config.optimizer_layout or proposal.optimizer_layout
    else:
        token_budget = config.token_budget or DEFAULT_TOKEN_BUDGET
        max_seq_len = config.max_seq_len or DEFAULT_MAX_SEQ_LEN
        layouts, planning = _cycled_strategies(config, model, token_budget, max_seq_len, options,
                                               cluster.devices if cluster else 0, device)
        optimizer_layout = config.optimizer_layout
    require(token_budget >= max_seq_len, "token_budget", token_budget,
            f"is smaller than one sequence of max_seq_len = {max_seq_len} tokens")
    data = _training_data(config, model, LoaderConfig(token_budget, max_seq_len, config.runtime.seed))
    if resume:
        check_resumable(resume.manifest, model.name, config.runtime.optimizer, data)
        require(resume.manifest.step < config.steps or not config.resume, "steps", config.steps,
                f"is already reached: the checkpoint {resume.folder} is after step {resume.manifest.step}")
    checkpoint = CheckpointPolicy(config.checkpoint_dir, config.checkpoint_every, config.keep_checkpoints,
                                  config.overwrite) if config.checkpoint_dir else None
    if cluster is not None:
        _check_cluster(cluster, config.nproc, layouts)
    return TrainingRun(model, layouts, planning, data, config.steps, optimizer_layout, checkpoint, resume,
                       init_from, config.tensorboard_dir, cluster, device)


def timing_device(gpu_name: str | None) -> DeviceSpec:
    """The device preset of a job on the GPU ``gpu_name`` (:func:`~hydraulis.base.presets.gpu_preset`;
    a name no preset matches: :data:`~hydraulis.base.presets.FALLBACK_GPU`, with a warning naming it),
    or the ``cpu`` preset (None). E.g. ``NVIDIA H200`` → ``h200``: without a space, a 4,096-token
    llama-1b step is priced at 989 TFLOP/s, not at the CPU's 0.2."""
    if gpu_name is None:
        return device_preset("cpu")
    preset = gpu_preset(gpu_name)
    if preset is None:
        log.warning("the GPU %r matches no device preset: step times are predicted with the analytic model of %s "
                    "(give --space with a profile of this device for measured ones)", gpu_name, FALLBACK_GPU)
        preset = FALLBACK_GPU
    return device_preset(preset)


def _check_loss_chunk(proposal: Proposal, chunk: int) -> None:
    """Refuse a loss chunk that may hold more than the one the proposal's memory was priced with:
    the same, or a smaller one (``0 < chunk ≤ C``), holds no more; the whole loss (0) or a larger
    chunk may not fit the pipelines' ``max_seq_len``."""
    priced = proposal.loss_chunk_tokens
    require(chunk == priced or 0 < chunk <= priced, "loss_chunk_tokens", chunk,
            f"may hold more than the proposal was priced with ({priced}; 0: the whole loss): train with "
            f"--loss-chunk-tokens {priced} or less, or propose again with --loss-chunk-tokens {chunk}")


def _resume_point(config: TrainConfig) -> Resume | None:
    """The checkpoint the job continues: ``resume``'s, else the newest usable one in
    ``checkpoint_dir`` (automatic resume, none when it holds no checkpoint), unless ``fresh`` —
    which refuses a folder holding checkpoints unless ``overwrite``."""
    if config.resume:
        return find_checkpoint(config.resume)
    if not config.checkpoint_dir:
        return None
    held = complete_checkpoints(config.checkpoint_dir)
    if config.fresh:
        require(not held or config.overwrite, "checkpoint_dir", config.checkpoint_dir,
                f"holds {len(held)} checkpoints (newest {held[0].name if held else ''}): resume from them "
                f"(leave out --no-resume), or give --overwrite-checkpoints to remove them")
        return None
    return find_checkpoint(config.checkpoint_dir) if held else None


def _check_cluster(cluster: ClusterDescription, nproc: int, layouts: tuple[StrategySplit, ...]) -> None:
    """One process per device of ``cluster``, and every strategy placed on its groups (fails fast,
    naming the strategy and the group short of ranks, :func:`hydraulis.base.placement.stage_offsets`)."""
    require(nproc in (0, cluster.devices), "nproc", nproc, f"must be the cluster's {cluster.devices} devices")
    for layout in layouts:
        stage_offsets([p.scheme for p in layout.pipelines], cluster.rank_ranges(), str(layout))


def _cycled_strategies(config: TrainConfig, model: ModelSpec, token_budget: int, max_seq_len: int,
                       options: DispatchOptions, cluster_devices: int,
                       device: DeviceSpec) -> tuple[tuple[StrategySplit, ...], Planning]:
    """Every SPEC as a layout and a one-strategy proposal on the job's devices (at least
    ``cluster_devices``), priced by the space or else by ``device``'s analytic model; micro-batches of at most ``micro_batch_tokens`` (default ``1.5·max_seq_len``);
    the reduction priced with the job's ``grad_reduce_dtype`` (``auto``: the space's)."""
    capacity = config.micro_batch_tokens or max_seq_len * 3 // 2
    require(capacity >= max_seq_len, "micro_batch_tokens", capacity,
            f"is smaller than one sequence of max_seq_len = {max_seq_len} tokens")
    fields = [f"strategies[{i}]" for i in range(len(config.strategies))]
    devices = max([config.nproc, cluster_devices] + [sum(g.count * g.scheme.devices for g in parse_strategy_spec(text, field))
                                     for text, field in zip(config.strategies, fields)])
    space = read_scheme_space(config.space_file) if config.space_file else None
    times = scheme_times(model, devices, space, device)
    layouts = tuple(parse_strategy(text, model, times, capacity, field) for text, field in zip(config.strategies, fields))
    pipeline_model = space.pipeline_model if space else PipelineModel()
    reduce_gbps, overlap = (space.reduce_gbps, space.reduce_overlap) if space else (0.0, 0.0)
    dtype = config.runtime.grad_reduce_dtype
    gradient_bytes = space.grad_reduce_bytes if space and dtype is ReduceDtype.AUTO else dtype.element_bytes("cuda")
    proposals = tuple(spec_proposal(layout, model, devices, token_budget, max_seq_len, pipeline_model, reduce_gbps,
                                    overlap, gradient_bytes) for layout in layouts)
    return layouts, Planning(proposals, True, config.method, options, config.planner_url)


def _training_data(config: TrainConfig, model: ModelSpec, loader: LoaderConfig) -> TrainingData:
    if config.corpus is None:
        pool = read_lengths(config.lengths_file) if config.lengths_file else synthetic_lengths(loader.max_seq_len,
                                                                                              loader.seed)
        source = config.lengths_file or "a synthetic long tail"
        fingerprint = (f"synthetic documents of {source} ({len(pool)} documents, {int(pool.sum())} tokens), "
                       f"vocabulary {model.vocab}")
        return TrainingData(SyntheticCorpus(pool, model.vocab, loader.seed), loader, fingerprint)
    cache = Path(config.cache_dir) if config.cache_dir else DEFAULT_CACHE
    spec = TokenizerSpec(config.tokenizer, model.vocab, cache / "tokenizers")
    measured = measure_corpus(CorpusSource(Path(config.corpus)), spec, cache / "datasets")
    vocabulary = measured.tokenizer.vocab_size
    require(vocabulary <= model.vocab, "tokenizer", str(measured.tokenizer.path),
            f"has {vocabulary} entries, more than model.vocab = {model.vocab}")
    digest = hashlib.sha256(measured.tokenizer.tokenizer.to_str().encode("utf-8")).hexdigest()[:16]
    fingerprint = f"corpus {measured.corpus.content_hash}, tokenizer {digest} ({vocabulary} entries)"
    return TrainingData(measured.tokenized.documents, loader, fingerprint)
