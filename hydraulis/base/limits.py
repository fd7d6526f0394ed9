"""The range of every number Hydraulis accepts, defined once (design §15).

The command line (argument types), the HTTP API (request schemas, hence the OpenAPI document)
and the core configurations all check against the limits below, so a value is refused with the
same words wherever it comes from: the field, the value and the range, e.g.
``devices: 1000000000 must be between 1 and 65536 (devices in the cluster)``.

The maxima are generous for real jobs — Hydraulis targets 64–1,024 devices, 7B–70B models and
about 1.6 M tokens per step — and tight enough that no value inside them makes a process run
without end, exhaust memory or overflow an int64: 65,536 devices (64× the target) still plan in
seconds; a step of 2²⁷ tokens is 80× the target's. Work that grows with a product of inputs has
its own limit (:data:`SEQUENCES`: documents × pieces per document, steps × sequences per step). Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hydraulis.base.errors import HydraulisError


@dataclass(frozen=True)
class Limit:
    """The accepted range ``[minimum, maximum]`` of one kind of number (``minimum`` excluded
    when ``exclusive_minimum``; an integer unless ``integer`` is False)."""

    name: str
    what: str
    minimum: float
    maximum: float
    integer: bool = True
    exclusive_minimum: bool = False

    def __post_init__(self) -> None:
        if not self.minimum <= self.maximum:
            raise ValueError(f"limit {self.name}: minimum {self.minimum} above maximum {self.maximum}")

    @property
    def range_text(self) -> str:
        """``between 1 and 65536``, ``> 0 and <= 86400``."""
        low, high = _number(self.minimum), _number(self.maximum)
        return f"> {low} and <= {high}" if self.exclusive_minimum else f"between {low} and {high}"

    @property
    def interval(self) -> str:
        """``[1, 65536]``, ``(0, 86400]``."""
        return f"{'(' if self.exclusive_minimum else '['}{_number(self.minimum)}, {_number(self.maximum)}]"

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is refused, or None when it is accepted."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            return "must be an integer" if self.integer else "must be a number"
        if self.integer and math.isfinite(value) and not float(value).is_integer():
            return "must be an integer"
        below = value <= self.minimum if self.exclusive_minimum else value < self.minimum
        if below or value > self.maximum:
            return f"must be {self.range_text} ({self.what})"
        return None

    def check(self, value: Any, field: str | None = None) -> Any:
        """``value`` (an ``int`` for integer limits) or :class:`HydraulisError` naming ``field``."""
        problem = self.problem(value)
        if problem:
            raise HydraulisError(field or self.name, value, problem)
        return int(value) if self.integer else float(value)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


DEVICES = Limit("devices", "devices in the cluster", 1, 65_536)
DEVICES_PER_NODE = Limit("devices_per_node", "devices in one node", 1, 1_024)
PARALLEL_DEGREE = Limit("degree", "a cp, tp, pp or dp degree", 1, 65_536)
TOKEN_BUDGET = Limit("token_budget", "tokens in one global batch", 1, 2**27)
MAX_SEQ_LEN = Limit("max_seq_len", "tokens in the longest sequence", 1, 2**24)
LENGTH = Limit("length", "tokens in one document or sequence", 1, 2**31 - 1)
LENGTHS = Limit("lengths", "lengths in one file or request", 1, 2**24)
SEQUENCES = Limit("sequences", "sequences held at once", 1, 2**26)
"""Documents cut to the maximum length, or drawn for sampled steps (about steps × token_budget /
mean length)."""
STRATEGIES = Limit("strategies", "strategies in one proposal", 1, 64)
PLANNER_STEPS = Limit("steps", "steps the planner samples", 1, 4_096)
SAMPLED_STEPS = Limit("steps", "steps sampled or simulated", 1, 100_000)
TRAINING_STEPS = Limit("steps", "training steps (0: write the initial checkpoint only)", 0, 2**31 - 1)
CHECKPOINT_EVERY = Limit("checkpoint_every", "steps between checkpoints, 0: at the end only", 0, 2**31 - 1)
KEEP_CHECKPOINTS = Limit("keep_checkpoints", "complete checkpoints kept, the newest", 1, 10_000)
SOLVER_NODES = Limit("solver_nodes", "branch-and-bound nodes of one integer program", 1, 10_000_000)
ILP_NODES = Limit("ilp_nodes", "branch-and-bound nodes of the packing integer program, 0 skips it", 0, 10_000_000)
SEARCH_EVALUATIONS = Limit("search_evaluations", "strategies the local search judges per range", 0, 100_000)
SYNTHESIS_EVALUATIONS = Limit("synthesis_evaluations", "strategies dispatch plans per step while synthesising", 0,
                              1_000)
BUCKET_WIDTH = Limit("bucket_width", "tokens per length-histogram bucket", 1, 2**24)
TIME_LIMIT_S = Limit("time_limit_s", "seconds of planning before the safety stop", 0, 86_400, integer=False,
                     exclusive_minimum=True)
ILP_TIME_LIMIT_S = Limit("time_limit_s", "seconds of the packing integer programs before the safety stop", 0, 3_600,
                         integer=False)
ALIGNMENT = Limit("alignment", "tokens a sequence is rounded up to a multiple of", 1, 65_536)
SEED = Limit("seed", "random seed", 0, 2**32 - 1)
PORT = Limit("port", "TCP port", 1, 65_535)
WORKERS = Limit("workers", "worker processes of the service", 1, 64)
QUEUE = Limit("queue", "requests waiting for a worker", 0, 4_096)
CONNECTIONS = Limit("max_connections", "connections the service holds open", 1, 1_000_000)
HEADER_TIMEOUT_S = Limit("header_timeout_s", "seconds for a request's line and headers", 0, 3_600, integer=False,
                         exclusive_minimum=True)
PROCESSES = Limit("nproc", "local processes", 1, 1_024)
THREADS = Limit("threads", "threads per process", 1, 1_024)
LAYERS = Limit("layers", "decoder layers", 1, 1_024)
REPEATS = Limit("repeats", "timed runs per point", 1, 1_000)
WARMUP = Limit("warmup", "untimed runs per point", 0, 1_000)
TOKEN_COUNTS = Limit("token_counts", "token counts in one profile or comparison", 1, 64)
VOCAB_SIZE = Limit("vocab_size", "tokenizer vocabulary entries", 257, 2**20)
BANDWIDTH_GBPS = Limit("reduce_gbps", "GB/s", 0, 1e6, integer=False, exclusive_minimum=True)
LOG_LENGTH = Limit("body_mu", "natural log of tokens", 0, 20, integer=False)
LOG_SPREAD = Limit("body_sigma", "standard deviation of the log of tokens", 0, 10, integer=False)
TAIL_INDEX = Limit("tail_alpha", "Pareto tail index", 0, 100, integer=False, exclusive_minimum=True)
SHARE = Limit("share", "a fraction", 0, 1, integer=False)
LEARNING_RATE = Limit("lr", "learning rate", 0, 10, integer=False, exclusive_minimum=True)
MIN_LEARNING_RATE = Limit("min_lr", "learning rate a decay ends at", 0, 10, integer=False)
ADAM_EPSILON = Limit("eps", "AdamW's epsilon", 0, 1, integer=False, exclusive_minimum=True)
WEIGHT_DECAY = Limit("weight_decay", "decoupled weight decay", 0, 10, integer=False)
GRAD_NORM = Limit("clip_grad_norm", "global gradient norm clipped to (inf: never)", 0, math.inf, integer=False,
                  exclusive_minimum=True)
LOSS_CHUNK_TOKENS = Limit("loss_chunk_tokens", "tokens per chunk of the loss (0: all at once)", 0, 2**24)
BUCKET_MB = Limit("bucket_mb", "MiB per gradient bucket", 0, 4096, integer=False, exclusive_minimum=True)
TIMEOUT_S = Limit("timeout_s", "seconds", 0, 86_400, integer=False, exclusive_minimum=True)
TOLERANCE = Limit("tolerance", "relative difference", 0, 1, integer=False)
MEMORY = Limit("memory_limit", "memory one device holds, in the problem's units", 0, 1e18, integer=False,
               exclusive_minimum=True)
EVALUATIONS = Limit("evaluations", "schedule evaluations per search worker, 0: no budget", 0, 10**12)
DEVICE_MEMORY = Limit("device_memory", "bytes of memory one device (process) holds", 1, 2**50)
SHARD_BYTES = Limit("max_shard_bytes", "bytes of one safetensors file", 2**10, 2**40)

LIMITS: dict[str, Limit] = {name: value for name, value in globals().items() if isinstance(value, Limit)}
"""Every limit above by its name here, in definition order (docs/cli.md's table lists them)."""


def check_sequences(count: float, field: str, value: Any, how: str) -> None:
    """Refuse work that would hold more than :data:`SEQUENCES` sequences at once: ``field`` =
    ``value`` leads to ``count`` sequences, ``how`` says how."""
    if count > SEQUENCES.maximum:
        raise HydraulisError(field, value, f"makes {how} = {int(count)} sequences, above the limit of "
                                           f"{int(SEQUENCES.maximum)} {SEQUENCES.what}")
