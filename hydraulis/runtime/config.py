"""Configuration of a training job (``hydraulis train``, ``hydraulis check-equivalence``).

Frozen and validated at construction; no torch here, so configs can be read, checked and
written (``hydraulis/artifacts/train_config.py``) without starting the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from hydraulis.errors import require, require_int, require_number


class DeviceKind(str, Enum):
    AUTO = "auto"
    """CUDA when available (one GPU per local rank, NCCL), else CPU (gloo)."""
    CPU = "cpu"
    CUDA = "cuda"


class Precision(str, Enum):
    FP32 = "fp32"
    BF16 = "bf16"
    """bf16 weights and activations for compute; fp32 master weights, gradients and loss."""


class OptimizerKind(str, Enum):
    SGD = "sgd"
    ADAM = "adam"


@dataclass(frozen=True)
class RuntimeOptions:
    """How a job runs. ``timeout_s`` bounds every collective and point-to-point wait: a rank
    that dies or hangs surfaces as an error on the others within it. ``threads`` is the
    number of intra-op CPU threads per process."""

    device: DeviceKind = DeviceKind.AUTO
    precision: Precision = Precision.FP32
    optimizer: OptimizerKind = OptimizerKind.ADAM
    lr: float = 1e-3
    seed: int = 0
    timeout_s: float = 60.0
    threads: int = 1

    def __post_init__(self) -> None:
        require(isinstance(self.device, DeviceKind), "device", self.device,
                f"must be one of {[d.value for d in DeviceKind]}")
        require(isinstance(self.precision, Precision), "precision", self.precision,
                f"must be one of {[p.value for p in Precision]}")
        require(isinstance(self.optimizer, OptimizerKind), "optimizer", self.optimizer,
                f"must be one of {[o.value for o in OptimizerKind]}")
        require(require_number(self.lr, "lr") > 0, "lr", self.lr, "must be > 0")
        require_int(self.seed, "seed", minimum=0)
        require(require_number(self.timeout_s, "timeout_s") > 0, "timeout_s", self.timeout_s, "must be > 0")
        require_int(self.threads, "threads", minimum=1)


@dataclass(frozen=True)
class TrainConfig:
    """``steps`` global batches of about ``token_budget`` tokens (documents of at most
    ``max_seq_len``, lengths drawn from ``lengths_file`` or a synthetic long-tailed
    distribution), the ``strategies`` (SPECs) cycled per step, micro-batches packed to at most
    ``micro_batch_tokens``. ``nproc`` processes (0: the most devices any strategy uses);
    ``space_file`` gives the time coefficients of the predicted times (default: analytic CPU)."""

    model: str
    strategies: tuple[str, ...]
    steps: int
    token_budget: int = 256
    max_seq_len: int = 64
    micro_batch_tokens: int = 96
    nproc: int = 0
    lengths_file: str | None = None
    space_file: str | None = None
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)

    def __post_init__(self) -> None:
        require(bool(self.model), "model", self.model, "must name a model preset")
        require(len(self.strategies) > 0, "strategies", [], "must list at least one strategy SPEC")
        require_int(self.steps, "steps", minimum=1)
        require_int(self.max_seq_len, "max_seq_len", minimum=1)
        require_int(self.token_budget, "token_budget", minimum=self.max_seq_len)
        require_int(self.micro_batch_tokens, "micro_batch_tokens", minimum=1)
        require_int(self.nproc, "nproc", minimum=0)
