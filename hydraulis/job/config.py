"""Configuration of a training job (``hydraulis train``, ``hydraulis check-equivalence``).

Frozen and validated at construction; no torch here, so configs can be read, checked and
written (``hydraulis/artifacts/train_config.py``) without starting the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydraulis.errors import require, require_http_url, require_int, require_number
from hydraulis.layout.activations import LOSS_CHUNK_TOKENS
from hydraulis.layout.buckets import BUCKET_MB
from hydraulis.job.schedule import LrSchedule, LrScheduleKind
from hydraulis.layout.kinds import DeviceKind, OptimizerKind, Precision, ReduceDtype
from hydraulis.limits import KEEP_CHECKPOINTS, SYNTHESIS_EVALUATIONS
from hydraulis.types import SYNTHESIS_EVALUATIONS_DEFAULT, BatchingMethod, OptimizerLayout, Synthesise


@dataclass(frozen=True)
class RuntimeOptions:
    """How a job runs. ``timeout_s`` bounds every collective and point-to-point wait: a rank
    that dies or hangs surfaces as an error on the others within it. ``threads`` is the
    number of intra-op CPU threads per process. ``grad_reduce_dtype`` is the dtype of the
    gradients sent to the optimizer layout (:mod:`hydraulis.runtime.gradients`; ``auto``: bf16 on
    CUDA, fp32 on the CPU). ``overlap_reduction`` exchanges gradients and weights with the
    optimizer layout in buckets of ``bucket_mb`` MiB overlapped with the backward and the forward
    (design §22; off: whole, between the phases). ``allow_math_attention`` lets CUDA run without
    ``varlen_attn`` on the slow math kernel (:func:`hydraulis.runtime.model.attention.attention_kernel`).
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

    device: DeviceKind = DeviceKind.AUTO
    precision: Precision = Precision.AUTO
    optimizer: OptimizerKind = OptimizerKind.ADAMW
    lr: float = 1e-3
    seed: int = 0
    timeout_s: float = 60.0
    threads: int = 1
    grad_reduce_dtype: ReduceDtype = ReduceDtype.AUTO
    record_operations: bool = False
    device_memory: int | None = None
    overlap_reduction: bool = True
    bucket_mb: float = BUCKET_MB
    allow_math_attention: bool = False
    loss_chunk_tokens: int = LOSS_CHUNK_TOKENS
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    decay_embeddings: bool = True
    clip_grad_norm: float = 1.0
    lr_schedule: LrScheduleKind = LrScheduleKind.COSINE
    warmup_steps: int = 0
    min_lr: float = 0.0

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
    ``cluster_file`` is a mixed cluster's description (:mod:`hydraulis.cluster`): the job then
    runs one process per device of it, numbered group by group, and every stage of a staged
    pipeline on its ``@GROUP``'s ranks (design §18.5).
    """

    model: str | None
    strategies: tuple[str, ...]
    steps: int
    token_budget: int | None = None
    max_seq_len: int | None = None
    micro_batch_tokens: int | None = None
    nproc: int = 0
    lengths_file: str | None = None
    space_file: str | None = None
    proposal_file: str | None = None
    method: BatchingMethod = BatchingMethod.DISPATCH_BALANCED_PACKING
    planner_url: str | None = None
    corpus: str | None = None
    tokenizer: str | None = None
    cache_dir: str | None = None
    optimizer_layout: OptimizerLayout | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    keep_checkpoints: int = 2
    fresh: bool = False
    overwrite: bool = False
    resume: str | None = None
    init_from: str | None = None
    synthesise: Synthesise = Synthesise.PROPOSAL
    synthesis_evaluations: int = SYNTHESIS_EVALUATIONS_DEFAULT
    tensorboard_dir: str | None = None
    cluster_file: str | None = None
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
        SYNTHESIS_EVALUATIONS.check(self.synthesis_evaluations, "synthesis_evaluations")
        require_int(self.checkpoint_every, "checkpoint_every", minimum=0)
        require(self.checkpoint_every == 0 or self.checkpoint_dir is not None, "checkpoint_every",
                self.checkpoint_every, "needs a checkpoint_dir")
        KEEP_CHECKPOINTS.check(self.keep_checkpoints, "keep_checkpoints")
        require(isinstance(self.fresh, bool) and isinstance(self.overwrite, bool), "fresh", self.fresh,
                "and overwrite must be true or false")
        require(not self.fresh or self.resume is None, "fresh", self.fresh, "starts from step 0: give no resume")
        require(not self.overwrite or self.fresh, "overwrite", self.overwrite,
                "removes the checkpoints of checkpoint_dir: only with fresh (--no-resume)")
        require(self.steps == 0 or self.runtime.warmup_steps <= self.steps, "warmup_steps", self.runtime.warmup_steps,
                f"must be at most steps = {self.steps}")
