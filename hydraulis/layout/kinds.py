"""The kinds a rank's layout and bytes depend on: its device, compute precision, the dtype its
gradients travel in, and the optimizer whose states it keeps (no torch).

They are the vocabulary of the job's configuration (:mod:`hydraulis.job.config`) and of the memory
accounting (:mod:`hydraulis.layout.states`: Adam and AdamW keep two fp32 moments per element, SGD none;
bf16 compute halves the bytes of weights and gradient buffers).
"""

from __future__ import annotations

from enum import Enum


class DeviceKind(str, Enum):
    AUTO = "auto"
    """CUDA when available (one GPU per local rank, NCCL), else CPU (gloo)."""
    CPU = "cpu"
    CUDA = "cuda"


class Precision(str, Enum):
    AUTO = "auto"
    """bf16 on CUDA, fp32 on the CPU."""
    FP32 = "fp32"
    BF16 = "bf16"
    """bf16 weights and activations for compute; fp32 gradient accumulation across
    micro-batches, fp32 master weights, moments and loss."""


class ReduceDtype(str, Enum):
    """The dtype gradients travel in to the optimizer layout (they are summed there in fp32)."""

    FP32 = "fp32"
    BF16 = "bf16"
    """Half the bytes of the reduction; each rank's fp32 accumulated gradient is rounded once."""


class OptimizerKind(str, Enum):
    SGD = "sgd"
    ADAM = "adam"
    """Adam with fixed β = (0.9, 0.999), ε = 1e-8 and no weight decay, elementwise by hand (the
    equivalence measurements of :mod:`hydraulis.runtime.equivalence` use it)."""
    ADAMW = "adamw"
    """AdamW (decoupled weight decay) with the job's betas, ε and weight decay, PyTorch's kernels."""
