"""Model states: the bytes a rank keeps per parameter element, by role (design §6.4).

Under a strategy a rank **holds** its stage's shards (:func:`~hydraulis.sharding.parameters.stage_shards`)
and, in the optimizer layout, **owns** a buffer (:mod:`hydraulis.sharding.ownership`)::

    held element   w bytes of weights in the compute dtype (2 bf16, 4 fp32)
                 + g = 4 bytes of gradient, accumulated over the step's micro-batches in fp32
    owned element  4 (master θ) + 4 (the reduced gradient) + 8 (Adam's m and v; SGD: 0)

``g`` is 4 whatever the compute dtype (fp32 ``.grad``, or an fp32 main buffer under bf16: 22
bytes per parameter; 0 on a one-owner rank, whose main gradients are the optimizer's own,
:func:`~hydraulis.sharding.step_memory.held_gradient_bytes`). The held elements of tp rank ``t``
of a stage with ``L_s`` layers::

    held = L_s·P_l(tp) + [first stage]·V·H/tp + [last stage]·(V·H/tp + H)
    P_l(tp) = 2·H·(h_q·d)/tp + 2·H·d·max(h_kv/tp, 1) + 3·H·F/tp + 2·H

(each rank holds the norm weights whole and, when ``tp > h_kv``, one kv head of its query
heads: :mod:`hydraulis.sharding.parameters`); an owner's buffer is
``≈ P/(dp_o·tp_o·pp_o)`` elements. Worked example, Llama-7B (``H = 4096``, ``F = 11008``,
``h_q = h_kv = 32``, ``P_l = 202,383,360``) at tp 8: ``P_l(8) = 25,305,088``; stage 0 of
``1,8,1`` holds ``32·P_l(8) + 2·32000·4096/8 + 4096 = 842,534,912`` elements — 1.69 GB of
bf16 weights and 3.37 GB of fp32 gradients; ZeRO-1 over 64 ranks (``64,1,1``) gives
each rank ``P/64 ≈ 105.3 M`` owned elements, 1.68 GB under Adam.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from hydraulis.base.errors import require
from hydraulis.base.types import ModelSpec, Scheme
from hydraulis.sharding.kinds import OptimizerKind, Precision
from hydraulis.sharding.parameters import (
    Holder,
    Shard,
    held,
    parameter_specs,
    shard_of,
    stage_shards,
)
from hydraulis.sharding.pipeline import PipelineSplit

DTYPE_BYTES = {Precision.FP32: 4, Precision.BF16: 2}
MASTER_BYTES = 4
MAIN_GRADIENT_BYTES = 4
REDUCED_GRADIENT_BYTES = 4
MOMENT_BYTES = {OptimizerKind.ADAM: 8, OptimizerKind.ADAMW: 8, OptimizerKind.SGD: 0}


@dataclass(frozen=True)
class StateBytes:
    """Bytes per held element (``weight``, ``grad``) and per owned element (``optimizer``)."""

    weight: int
    grad: int
    optimizer: int

    @property
    def compute(self) -> int:
        return self.weight + self.grad

    @property
    def total(self) -> int:
        return self.weight + self.grad + self.optimizer


def state_bytes(precision: Precision, optimizer: OptimizerKind) -> StateBytes:
    """The module docstring's bytes for a resolved ``precision`` (fp32 or bf16)."""
    require(precision in DTYPE_BYTES, "precision", precision.value, "must be resolved to fp32 or bf16")
    return StateBytes(DTYPE_BYTES[precision], MAIN_GRADIENT_BYTES, MASTER_BYTES + REDUCED_GRADIENT_BYTES + MOMENT_BYTES[optimizer])


def device_precision(device: str) -> Precision:
    """The precision the runtime computes in on a device preset: fp32 on ``cpu``, bf16 on an
    accelerator (:class:`~hydraulis.sharding.kinds.Precision` ``auto``)."""
    return Precision.FP32 if device == "cpu" else Precision.BF16


def shard_elements(shard: Shard) -> int:
    spec = shard.spec
    return spec.numel if shard.dim is None else spec.numel // spec.shape[shard.dim] * shard.length


def held_elements(model: ModelSpec, layout: PipelineSplit, stage: int, tp_rank: int) -> int:
    """Elements of the shards tp rank ``tp_rank`` of ``stage`` holds."""
    return sum(shard_elements(shard) for shard in stage_shards(model, layout, stage, tp_rank))


@lru_cache(maxsize=256)
def layer_elements(model: ModelSpec, scheme: Scheme, stage: int) -> int:
    """``P_l(tp_σ)``: elements of one decoder layer a tp rank of ``stage`` of ``scheme`` holds (the
    same on every tp rank of the stage); of a mixture of experts, with the ``E/ep`` routed experts
    of one expert-parallel rank."""
    return sum(shard_elements(shard_of(spec, scheme, stage, 0)) for spec in parameter_specs(model)
               if spec.holder is Holder.LAYER and spec.layer == 0 and held(spec, scheme, 0))


@lru_cache(maxsize=4096)
def largest_held_elements(model: ModelSpec, layout: PipelineSplit, stage: int) -> int:
    """Elements of the largest shard tp rank 0 of ``stage`` holds: the one parameter whose
    gradient a backward holds in the compute dtype before adding it to its fp32 main buffer
    (:mod:`hydraulis.sharding.step_memory`)."""
    return max(shard_elements(shard) for shard in stage_shards(model, layout, stage, 0))
