"""The kinds a rank's layout and bytes depend on: its device, compute precision, the dtype its
gradients travel in, and the optimizer whose states it keeps (no torch).

They are the vocabulary of the job's configuration (:mod:`hydraulis.job.config`) and of the memory
accounting (:mod:`hydraulis.sharding.states`: Adam and AdamW keep two fp32 moments per element, SGD none;
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

    AUTO = "auto"
    """bf16 on CUDA (the cost model's 2 bytes per gradient, design §6.3), fp32 on the CPU."""
    FP32 = "fp32"
    BF16 = "bf16"
    """Half the bytes of the reduction; each rank's fp32 accumulated gradient is rounded once."""


    def resolve(self, device_type: str) -> ReduceDtype:
        """The dtype on a device of ``device_type`` (``"cuda"`` or ``"cpu"``): AUTO resolved."""
        if self is not ReduceDtype.AUTO:
            return self
        return ReduceDtype.BF16 if device_type == "cuda" else ReduceDtype.FP32

    def element_bytes(self, device: str) -> int:
        """Bytes per gradient sent on ``device`` — ``"cpu"``, ``"cuda"`` or a device preset's
        name (every preset but ``cpu`` is a CUDA device): 2 for bf16, 4 for fp32. The cost
        model's ``grad_reduce_bytes`` (design §6.3) comes from here, so it follows the runtime."""
        return 2 if self.resolve("cpu" if device == "cpu" else "cuda") is ReduceDtype.BF16 else 4


class OptimizerKind(str, Enum):
    SGD = "sgd"
    ADAM = "adam"
    """Adam with fixed β = (0.9, 0.999), ε = 1e-8 and no weight decay, elementwise by hand (the
    equivalence measurements of :mod:`hydraulis.runtime.equivalence` use it)."""
    ADAMW = "adamw"
    """AdamW (decoupled weight decay) with the job's betas, ε and weight decay, PyTorch's kernels."""
