"""Configuration of a training job (``hydraulis train``, ``hydraulis check-equivalence``).

Frozen and validated at construction; no torch here, so configs can be read, checked and
written (``hydraulis/artifacts/train_config.py``) without starting the runtime. Every field is
an option of the job's tree (:mod:`hydraulis.job.options`): its ``option(...)`` metadata names
its section, help and limit, from which the flags, the TOML keys and the saved JSON are derived.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from hydraulis.base import limits
from hydraulis.base.errors import require, require_http_url, require_int, require_number
from hydraulis.base.presets import model_names
from hydraulis.base.types import (
    LOSS_CHUNK_TOKENS,
    SYNTHESIS_EVALUATIONS_DEFAULT,
    BatchingMethod,
    OptimizerLayout,
    Synthesise,
)
from hydraulis.job.options import Section, option
from hydraulis.job.schedule import LrSchedule, LrScheduleKind
from hydraulis.sharding.buckets import BUCKET_MB
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind, Precision, ReduceDtype

MODEL, TRAINING, PARALLELISM, OPTIMIZER, LR_SCHEDULER, RUNTIME, CHECKPOINT, METRICS = Section
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuntimeOptions:
    """How a job runs. ``timeout_s`` bounds every collective and point-to-point wait: a rank
    that dies or hangs surfaces as an error on the others within it. ``threads`` is the
    number of intra-op CPU threads per process. ``grad_reduce_dtype`` is the dtype of the
    gradients sent to the optimizer layout (:mod:`hydraulis.runtime.gradients`; ``auto``: bf16 on
    CUDA, fp32 on the CPU). ``overlap_reduction`` exchanges gradients and weights with the
    optimizer layout in buckets of ``bucket_mb`` MiB overlapped with the backward and the forward
    (design §9.4; off: whole, between the phases). ``allow_math_attention`` lets CUDA run without
    ``varlen_attn`` on the slow math kernel (:func:`hydraulis.runtime.model.attention.attention_kernel`).
    ``compile_layers`` compiles each decoder layer with ``torch.compile``
    (:meth:`~hydraulis.runtime.model.decoder.DecoderLayer.compile`; off by default until a GPU
    run shows it pays).
    ``loss_chunk_tokens`` computes the loss over the vocabulary that many tokens at a time
    (:mod:`hydraulis.runtime.model.vocab_loss`; 0: all at once, ``[T × V]`` fp32 logits).
    ``record_operations`` records every stage's forwards and backwards, in order, with their
    times, into each step's record (one more all-gather per step). ``device_memory`` is the bytes
    each process may hold (None: no budget): a step whose measured peak exceeds it on any rank
    fails (:mod:`hydraulis.runtime.memory.peak`).

    The optimizer recipe defaults to the common LLM one (Llama, OLMo, Megatron-LM): AdamW with
    ``betas`` (0.9, 0.95), ``eps`` 1e-8 and decoupled ``weight_decay`` 0.1 on matrices only —
    never on norms and other 1-D parameters, on the token embedding and the output head only
    with ``decay_embeddings`` (``betas``, ``eps``, ``weight_decay`` and ``decay_embeddings`` are
    AdamW's; SGD and Adam have fixed constants) — the gradient clipped to a global norm of
    ``clip_grad_norm`` (``inf``: never; :mod:`hydraulis.runtime.optimizer.clipping`) and the
    learning rate following ``lr_schedule`` from ``lr`` down to ``min_lr`` after
    ``warmup_steps`` updates (:mod:`hydraulis.job.schedule`)."""

    device: DeviceKind = field(default=DeviceKind.AUTO, metadata=option(RUNTIME, "default auto: cuda if available"))
    precision: Precision = field(
        default=Precision.AUTO,
        metadata=option(
            RUNTIME,
            "default auto: bf16 on CUDA, fp32 on the CPU; bf16 computes in bf16 and accumulates gradients across "
            "micro-batches in fp32, with fp32 master weights and moments",
        ),
    )
    optimizer: OptimizerKind = field(
        default=OptimizerKind.ADAMW,
        metadata=option(
            OPTIMIZER,
            "adamw (default; train: PyTorch's AdamW with --betas, --eps, --weight-decay), adam (fixed betas "
            "0.9/0.999, no decay; check-equivalence's default) or sgd",
        ),
    )
    lr: float = field(
        default=1e-3,
        metadata=option(
            OPTIMIZER, "peak learning rate (default 1e-3; check-equivalence: 1e-4)", limit=limits.LEARNING_RATE
        ),
    )
    seed: int = field(
        default=0,
        metadata=option(TRAINING, "initial weights, data order, dispatch ties (default 0)", limit=limits.SEED),
    )
    timeout_s: float = field(
        default=60.0,
        metadata=option(RUNTIME, "seconds a rank waits for a peer before failing (default 60)", limit=limits.TIMEOUT_S),
    )
    threads: int = field(
        default=1, metadata=option(RUNTIME, "CPU threads per process (default 1)", limit=limits.THREADS)
    )
    grad_reduce_dtype: ReduceDtype = field(
        default=ReduceDtype.AUTO,
        metadata=option(
            RUNTIME,
            "dtype of the gradients sent to the optimizer layout, summed there in fp32 (default auto: bf16 on "
            "CUDA, fp32 on the CPU, as the cost model prices it by default; bf16 halves the reduction's bytes)",
        ),
    )
    record_operations: bool = field(
        default=False,
        metadata=option(
            METRICS,
            "record every stage's forwards and backwards, in order, with their times, and time every bucket "
            "of the overlapped reduction, in the train log (benchmarks/fidelity.py compares them with the "
            "cost model)",
        ),
    )
    device_memory: int | None = field(
        default=None,
        metadata=option(
            RUNTIME,
            "memory budget of every process: a step whose measured peak (CPU: the tensor storage the rank "
            "holds and creates; CUDA: the allocator's peak) exceeds it on a rank fails, naming the step, the "
            "rank and the bytes (default: no budget)",
            limit=limits.DEVICE_MEMORY,
            metavar="BYTES",
        ),
    )
    overlap_reduction: bool = field(
        default=True,
        metadata=option(
            RUNTIME,
            "exchange gradients and weights with the optimizer layout in buckets overlapped with the backward "
            "and the forward (default); --no-overlap-reduction: whole, after the backward and before the "
            "forward (design §9.4)",
        ),
    )
    bucket_mb: float = field(
        default=BUCKET_MB,
        metadata=option(
            RUNTIME,
            "size of the overlapped reduction's buckets, in MiB of the reduction's dtype (default 25, the "
            "first at most 1, as PyTorch DDP; a stage smaller than one bucket sends its gradients whole, "
            "after its backward)",
            limit=limits.BUCKET_MB,
            metavar="MIB",
        ),
    )
    allow_math_attention: bool = field(
        default=False,
        metadata=option(
            RUNTIME,
            "on CUDA with a torch without varlen_attn (< 2.11), run attention on the blocked fp32 math kernel "
            "with a warning instead of failing (several times slower)",
        ),
    )
    compile_layers: bool = field(
        default=False,
        metadata=option(
            RUNTIME,
            "compile each decoder layer with torch.compile (fewer kernel launches per micro-batch; the first "
            "micro-batches of each size pay the compilation; off by default)",
            key="compile",
        ),
    )
    loss_chunk_tokens: int = field(
        default=LOSS_CHUNK_TOKENS,
        metadata=option(
            RUNTIME,
            "compute the loss over the vocabulary this many tokens at a time, forward and backward, never "
            "holding a micro-batch's logits in fp32 (default 1024; 0: all at once; with --proposal, the same "
            "as or smaller than the chunk the proposal was priced with)",
            limit=limits.LOSS_CHUNK_TOKENS,
            metavar="TOKENS",
        ),
    )
    betas: tuple[float, float] = field(
        default=(0.9, 0.95),
        metadata=option(
            OPTIMIZER,
            "AdamW's moment decay rates, each in [0, 1) (default 0.9 0.95)",
            limit=limits.SHARE,
            metavar=("BETA1", "BETA2"),
        ),
    )
    eps: float = field(
        default=1e-8, metadata=option(OPTIMIZER, "AdamW's epsilon, > 0 (default 1e-8)", limit=limits.ADAM_EPSILON)
    )
    weight_decay: float = field(
        default=0.1,
        metadata=option(
            OPTIMIZER,
            "AdamW's decoupled weight decay, >= 0, on matrices only: never on norms and other 1-D "
            "parameters (default 0.1)",
            limit=limits.WEIGHT_DECAY,
        ),
    )
    decay_embeddings: bool = field(
        default=True,
        metadata=option(OPTIMIZER, "whether the token embedding and the output head are decayed too (default yes)"),
    )
    clip_grad_norm: float = field(
        default=1.0,
        metadata=option(
            OPTIMIZER,
            "clip the gradient to this global norm, > 0, computed once per step in the optimizer layout "
            "(inf: never clip); a step whose norm is not finite is skipped on every rank (default 1.0; "
            "check-equivalence: inf)",
            limit=limits.GRAD_NORM,
            metavar="NORM",
        ),
    )
    lr_schedule: LrScheduleKind = field(
        default=LrScheduleKind.COSINE,
        metadata=option(
            LR_SCHEDULER,
            "learning rate per update after warmup: constant, linear or cosine decay from --lr to "
            "--min-lr over --steps (default cosine; check-equivalence: constant)",
        ),
    )
    warmup_steps: int = field(
        default=0,
        metadata=option(
            LR_SCHEDULER,
            "updates of linear warmup to --lr (default 0); more than --steps are cut to --steps, with a warning",
            limit=limits.TRAINING_STEPS,
        ),
    )
    min_lr: float = field(
        default=0.0,
        metadata=option(
            LR_SCHEDULER,
            "learning rate the decay ends at, between 0 and --lr (default 0)",
            limit=limits.MIN_LEARNING_RATE,
        ),
    )

    def __post_init__(self) -> None:
        require(isinstance(self.device, DeviceKind), "device", self.device,
                f"must be one of {[d.value for d in DeviceKind]}")
        require(isinstance(self.precision, Precision), "precision", self.precision,
                f"must be one of {[p.value for p in Precision]}")
        require(isinstance(self.grad_reduce_dtype, ReduceDtype), "grad_reduce_dtype", self.grad_reduce_dtype,
                f"must be one of {[d.value for d in ReduceDtype]}")
        require(isinstance(self.optimizer, OptimizerKind), "optimizer", self.optimizer,
                f"must be one of {[o.value for o in OptimizerKind]}")
        require(require_number(self.lr, "lr") > 0, "lr", self.lr, "must be > 0")
        require_int(self.seed, "seed", minimum=0)
        require(require_number(self.timeout_s, "timeout_s") > 0, "timeout_s", self.timeout_s, "must be > 0")
        require_int(self.threads, "threads", minimum=1)
        require(isinstance(self.record_operations, bool), "record_operations", self.record_operations,
                "must be true or false")
        if self.device_memory is not None:
            require_int(self.device_memory, "device_memory", minimum=1)
        require(isinstance(self.overlap_reduction, bool), "overlap_reduction", self.overlap_reduction,
                "must be true or false")
        require(require_number(self.bucket_mb, "bucket_mb") > 0, "bucket_mb", self.bucket_mb, "must be > 0")
        require(isinstance(self.allow_math_attention, bool), "allow_math_attention", self.allow_math_attention,
                "must be true or false")
        require(isinstance(self.compile_layers, bool), "compile_layers", self.compile_layers, "must be true or false")
        require_int(self.loss_chunk_tokens, "loss_chunk_tokens", minimum=0)
        require(isinstance(self.betas, tuple) and len(self.betas) == 2, "betas", self.betas,
                "must be two numbers, beta1 and beta2")
        for name, beta in zip(("betas[0]", "betas[1]"), self.betas):
            require(0 <= require_number(beta, name) < 1, name, beta, "must be >= 0 and < 1")
        require(require_number(self.eps, "eps") > 0, "eps", self.eps, "must be > 0")
        require_number(self.weight_decay, "weight_decay", minimum=0)
        require(isinstance(self.decay_embeddings, bool), "decay_embeddings", self.decay_embeddings,
                "must be true or false")
        require(isinstance(self.clip_grad_norm, (int, float)) and not isinstance(self.clip_grad_norm, bool)
                and self.clip_grad_norm > 0, "clip_grad_norm", self.clip_grad_norm, "must be > 0 (inf: never clip)")
        self.schedule(0)

    def schedule(self, steps: int) -> LrSchedule:
        """The learning-rate schedule of a job of ``steps`` steps."""
        return LrSchedule(self.lr_schedule, self.lr, steps, self.warmup_steps, self.min_lr)


@dataclass(frozen=True)
class TrainConfig:
    """What to train and how.

    Strategies: either ``strategies`` (SPECs, cycled per step, each planned as a one-strategy
    proposal whose pipelines hold micro-batches of at most ``micro_batch_tokens``) or
    ``proposal_file`` (dispatch chooses among its strategies every step). ``method`` is the
    batching method, ``planner_url`` a planning service to ask instead of dispatching
    in-process. ``steps`` is the step count to reach (a resumed job continues from its
    checkpoint's step). Global batches of at most ``token_budget`` tokens cut to
    ``max_seq_len`` (both default to the proposal's, else 256 and 64) come from ``corpus``
    (tokenized with ``tokenizer``, or a byte-level BPE of the model's vocabulary trained and
    cached under ``cache_dir``) or from synthetic documents (lengths from ``lengths_file`` or a
    long tail). ``nproc`` processes (0: the most devices a strategy or the proposal uses);
    ``space_file`` gives SPEC strategies their time coefficients (default: analytic CPU);
    ``optimizer_layout`` is ``(dp, tp, pp)`` (default: the proposal's, else ZeRO-1 over all
    ranks). Checkpoints go to ``checkpoint_dir`` every ``checkpoint_every`` steps (0: at the
    end only), the newest ``keep_checkpoints`` kept; a job with a ``checkpoint_dir`` continues
    from its newest usable checkpoint by itself (a restarted job goes on where it stopped)
    unless ``fresh`` — which refuses a folder holding checkpoints unless ``overwrite`` (then
    they are removed); ``resume`` is a checkpoint folder or root to continue from; ``init_from`` a
    Hugging Face Llama directory whose weights the job starts from. ``model`` names a preset;
    without one the model comes from ``init_from``'s ``config.json`` or the checkpoint resumed.
    ``steps`` 0 with a ``checkpoint_dir`` writes the initial checkpoint only (a conversion).
    With a proposal, ``synthesise`` says which schemes a strategy made for one step may use
    (``space``: those of ``space_file``) and ``synthesis_evaluations`` its budget
    (:mod:`hydraulis.dispatch.synthesis`).
    Rank 0 writes TensorBoard event files to ``tensorboard_dir`` (:mod:`hydraulis.runtime.tensorboard`).
    ``cluster_file`` is a mixed cluster's description (:mod:`hydraulis.base.cluster`): the job then
    runs one process per device of it, numbered group by group, and every stage of a staged
    pipeline on its ``@GROUP``'s ranks (design §9.2).
    """

    model: str | None = field(
        metadata=option(
            MODEL, "model preset, e.g. tiny (train: or the model of --init-from or --resume)", choices=model_names
        )
    )
    strategies: tuple[str, ...] = field(
        metadata=option(
            PARALLELISM,
            "strategy SPEC, pipelines joined by '+', each cp,tp,pp[:L1/L2/…][[OPTIONS]][xCOUNT] with "
            "OPTIONS sp (sequence parallelism, tp > 1) and recompute=none|selective|full (full:K: the first "
            "K layers of each stage, full:K1/K2/…: per stage) and, for a mixture of experts, ep=N (expert "
            "parallelism over N tp ranks, with sp), e.g. 1,2,1+1,1,2, 1,1,2x2, 1,4,1[sp,recompute=full]x2 or "
            "1,2,1[sp,ep=2]+1,1,1; repeat to cycle strategies per step",
            key="strategy",
            metavar="SPEC",
        )
    )
    steps: int = field(
        metadata=option(
            TRAINING, "training steps (with --resume: the step count to reach)", limit=limits.TRAINING_STEPS
        )
    )
    token_budget: int | None = field(
        default=None,
        metadata=option(
            TRAINING, "tokens per global batch (default: the proposal's, else 256)", limit=limits.TOKEN_BUDGET
        ),
    )
    max_seq_len: int | None = field(
        default=None,
        metadata=option(
            TRAINING,
            "longest piece, longer documents are cut (default: the proposal's, else 64)",
            limit=limits.MAX_SEQ_LEN,
        ),
    )
    micro_batch_tokens: int | None = field(
        default=None,
        metadata=option(
            TRAINING,
            "micro-batch capacity of --strategy pipelines (default 1.5 × max-seq-len)",
            limit=limits.TOKEN_BUDGET,
        ),
    )
    nproc: int = field(
        default=0,
        metadata=option(
            PARALLELISM,
            "local processes (default: the fewest the strategies and the optimizer layout need); under "
            "torchrun, its WORLD_SIZE",
            limit=limits.PROCESSES,
        ),
    )
    lengths_file: str | None = field(
        default=None,
        metadata=option(
            TRAINING,
            "lengths file of synthetic documents (default: a synthetic long tail)",
            key="lengths",
            reads="lengths",
        ),
    )
    space_file: str | None = field(
        default=None,
        metadata=option(
            PARALLELISM,
            "scheme space for the predicted times of --strategy (default: analytic cpu)",
            key="space",
            reads="scheme_space",
        ),
    )
    proposal_file: str | None = field(
        default=None,
        metadata=option(
            PARALLELISM,
            "proposal JSON (hydraulis propose): dispatch picks one of its strategies every step (instead "
            "of --strategy)",
            key="proposal",
            reads="proposal",
        ),
    )
    method: BatchingMethod = field(
        default=BatchingMethod.DISPATCH_BALANCED_PACKING,
        metadata=option(PARALLELISM, "batching method (default dispatch_balanced_packing, Hydraulis)"),
    )
    planner_url: str | None = field(
        default=None,
        metadata=option(
            PARALLELISM, "ask a running 'hydraulis serve' at this URL for step plans (default: dispatch in-process)"
        ),
    )
    corpus: str | None = field(
        default=None,
        metadata=option(TRAINING, "train on this corpus (e.g. hydraulis data build-stdlib's JSONL)", reads="corpus"),
    )
    tokenizer: str | None = field(
        default=None,
        metadata=option(
            TRAINING,
            "tokenizer.json for --corpus (default: a byte-level BPE of the model's vocabulary, trained on the "
            "corpus and cached)",
            reads="tokenizer",
        ),
    )
    cache_dir: str | None = field(
        default=None,
        metadata=option(TRAINING, "trained tokenizers and datasets' cache (default ~/.cache/hydraulis)", writes=True),
    )
    optimizer_layout: OptimizerLayout | None = field(
        default=None,
        metadata=option(
            PARALLELISM,
            "layout of master weights and Adam moments (default: the proposal's, else DP = ranks)",
            metavar="DP,TP,PP",
        ),
    )
    checkpoint_dir: str | None = field(
        default=None,
        metadata=option(
            CHECKPOINT,
            "write checkpoints (from the optimizer layout) under this folder; a job continues from the "
            "newest usable checkpoint there by itself (so torchrun --max-restarts N restarts go on where "
            "they stopped), logging which",
            writes=True,
            train_only=True,
        ),
    )
    checkpoint_every: int = field(
        default=0,
        metadata=option(
            CHECKPOINT,
            "steps between checkpoints (default 0: at the end only)",
            limit=limits.CHECKPOINT_EVERY,
            train_only=True,
        ),
    )
    keep_checkpoints: int = field(
        default=2,
        metadata=option(
            CHECKPOINT,
            "keep the newest K complete checkpoints, older ones are removed; a corrupted newest one falls "
            "back to the previous (default 2)",
            limit=limits.KEEP_CHECKPOINTS,
            metavar="K",
            train_only=True,
        ),
    )
    fresh: bool = field(
        default=False,
        metadata=option(
            CHECKPOINT,
            "start from step 0 even when --checkpoint-dir holds checkpoints (refused unless --overwrite-checkpoints)",
            key="no_resume",
            train_only=True,
        ),
    )
    overwrite: bool = field(
        default=False,
        metadata=option(
            CHECKPOINT,
            "with --no-resume: remove the checkpoints already in --checkpoint-dir",
            key="overwrite_checkpoints",
            train_only=True,
        ),
    )
    resume: str | None = field(
        default=None,
        metadata=option(
            CHECKPOINT,
            "continue from this checkpoint folder, or the newest complete one under this root; strategy, "
            "proposal, method and process count may differ",
            reads="checkpoint",
            train_only=True,
        ),
    )
    init_from: str | None = field(
        default=None,
        metadata=option(
            MODEL,
            "start from a Hugging Face Llama directory (config.json and model.safetensors or a sharded index): "
            "the model comes from its config.json, each rank reads only the weights it owns; with --steps 0 "
            "--checkpoint-dir C it writes C/step-00000000 (a conversion)",
            reads="hf_model",
            metavar="HF_DIR",
            train_only=True,
        ),
    )
    synthesise: Synthesise = field(
        default=Synthesise.PROPOSAL,
        metadata=option(
            PARALLELISM,
            "with --proposal: make a strategy for a step when it beats the proposal's, switch included, "
            "from the proposal's schemes (default proposal), --space's (space) or never (off)",
        ),
    )
    synthesis_evaluations: int = field(
        default=SYNTHESIS_EVALUATIONS_DEFAULT,
        metadata=option(
            PARALLELISM,
            f"strategies dispatch may plan per step while synthesising (default {SYNTHESIS_EVALUATIONS_DEFAULT})",
            limit=limits.SYNTHESIS_EVALUATIONS,
            metavar="N",
        ),
    )
    tensorboard_dir: str | None = field(
        default=None,
        metadata=option(
            METRICS,
            "write TensorBoard event files here (rank 0, every step: loss, tokens/s, measured and predicted "
            "step time and their error, the slowest pipeline, propagation and exposed reduction ms, the hidden "
            "fraction with --record-operations, strategy index, planning and wait ms; the proposal as text); "
            "watch with: tensorboard --logdir DIR",
            key="tensorboard",
            writes=True,
            metavar="DIR",
            train_only=True,
        ),
    )
    cluster_file: str | None = field(
        default=None,
        metadata=option(
            PARALLELISM,
            "mixed cluster description JSON (examples/clusters/a100_h100.json): one process per device, "
            "numbered group by group; each stage of a staged pipeline runs on its @GROUP's ranks, other "
            "stages on the first group's",
            key="cluster",
            reads="cluster",
        ),
    )
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)

    def __post_init__(self) -> None:
        require(self.model is None or bool(self.model), "model", self.model, "must name a model preset")
        require(self.model is not None or bool(self.init_from or self.resume), "model", self.model,
                "is required: name a model preset, or give init_from (a Hugging Face directory) or resume")
        require(self.model is None or self.init_from is None, "model", self.model,
                "comes from init_from's config.json: give one of them")
        require(self.init_from is None or self.resume is None, "init_from", self.init_from,
                "starts a job from weights; a resumed job has its own: give one of init_from and resume")
        require(bool(self.strategies) != bool(self.proposal_file), "strategies", list(self.strategies),
                "give strategy SPECs or a proposal file, exactly one of them")
        require_int(self.steps, "steps", minimum=0)
        require(self.steps > 0 or self.checkpoint_dir is not None, "steps", self.steps,
                "trains nothing: with 0 steps give a checkpoint_dir to write the initial checkpoint")
        for name in ("token_budget", "max_seq_len", "micro_batch_tokens"):
            if getattr(self, name) is not None:
                require_int(getattr(self, name), name, minimum=2)
        if self.token_budget is not None and self.max_seq_len is not None:
            require(self.token_budget >= self.max_seq_len, "token_budget", self.token_budget,
                    f"is smaller than one sequence of max_seq_len = {self.max_seq_len} tokens")
        require_int(self.nproc, "nproc", minimum=0)
        require(isinstance(self.method, BatchingMethod), "method", self.method,
                f"must be one of {[m.value for m in BatchingMethod]}")
        if self.planner_url is not None:
            require_http_url(self.planner_url, "planner_url")
        require(self.corpus is None or self.lengths_file is None, "lengths_file", self.lengths_file,
                "gives synthetic documents' lengths; a corpus has its own")
        require(self.tokenizer is None or self.corpus is not None, "tokenizer", self.tokenizer, "needs a corpus")
        require(isinstance(self.synthesise, Synthesise), "synthesise", self.synthesise,
                f"must be one of {[m.value for m in Synthesise]}")
        require(self.synthesise is not Synthesise.SPACE or self.space_file is not None, "synthesise",
                self.synthesise.value, "needs the scheme space: give space_file (--space)")
        limits.SYNTHESIS_EVALUATIONS.check(self.synthesis_evaluations, "synthesis_evaluations")
        require_int(self.checkpoint_every, "checkpoint_every", minimum=0)
        require(self.checkpoint_every == 0 or self.checkpoint_dir is not None, "checkpoint_every",
                self.checkpoint_every, "needs a checkpoint_dir")
        limits.KEEP_CHECKPOINTS.check(self.keep_checkpoints, "keep_checkpoints")
        require(isinstance(self.fresh, bool) and isinstance(self.overwrite, bool), "fresh", self.fresh,
                "and overwrite must be true or false")
        require(not self.fresh or self.resume is None, "fresh", self.fresh, "starts from step 0: give no resume")
        require(not self.overwrite or self.fresh, "overwrite", self.overwrite,
                "removes the checkpoints of checkpoint_dir: only with fresh (--no-resume)")
        require(self.steps == 0 or self.runtime.warmup_steps <= self.steps, "warmup_steps", self.runtime.warmup_steps,
                f"must be at most steps = {self.steps} (a flag or job file cuts it, with a warning)")


def warmup_within_steps(values: dict[str, object], base: TrainConfig | None) -> dict[str, object]:
    """``values`` (nested, as :func:`hydraulis.job.options.nested_values` gives them, applied over
    ``base``) with a warm-up longer than the job's steps cut to the steps, with a warning: a job
    file smoke-tested with ``--steps 2`` runs its schedule compressed instead of being refused."""
    runtime = values.get("runtime", {})
    steps = values.get("steps", base.steps if base else 0)
    warmup = runtime.get("warmup_steps", base.runtime.warmup_steps if base else 0)
    if not (isinstance(steps, int) and isinstance(warmup, int)) or not 0 < steps < warmup:
        return values
    logger.warning("warmup_steps = %d is longer than steps = %d: the warm-up is cut to %d steps", warmup, steps, steps)
    return {**values, "runtime": {**runtime, "warmup_steps": steps}}
