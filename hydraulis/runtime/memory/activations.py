"""Activations: what one rank of a pipeline stage keeps for its backward, per token (design §4.4).

A micro-batch of ``T`` tokens puts ``t = T/cp`` on each rank (context parallelism splits the
tokens); between the blocks a rank holds ``t/s`` of them, ``s = tp`` under sequence
parallelism (``sp``), else 1. Widths per tp rank: ``H`` hidden, ``q = h_q·d/tp`` query,
``k = d·max(h_kv/tp, 1)`` key/value, ``F' = F/tp`` MLP, ``h = h_q/tp`` heads, ``V' = V/tp``
vocabulary; ``b`` bytes per element of the compute dtype (2 bf16, 4 fp32). What autograd keeps
of one decoder layer, bytes per token of ``t`` (:func:`layer_bytes_per_token`)::

    recompute none:
        2 norms, on t/s tokens   2·(4H + 4 + 4H + b·H)/s    fp32 input and normalised rows,
                                                            1/rms, the output
        gathered norm outputs    [s > 1]·2·b·H               what the tp block's linears keep
        rotary Q and K           8q + b·q + 8k               fp32 input and rotated half of each,
                                                            the rotated Q
        K and V over cp          cp·2·b·k                    gathered for attention
        attention                b·q + 4h                    output and log-sum-exp
        MLP                      4·b·F'                      gate, up, silu, their product
    recompute selective: none's bytes without the log-sum-exp (the attention core runs again)
    recompute full:      b·H/s, the layer's input

A stage of ``L_s`` layers keeps per micro-batch (:func:`micro_batch_bytes_per_token`) its
layers' bytes, the rotary tables ``8d`` (fp32 cos and sin, shared by its layers), the input it
received and the output it sent (``b·H/s`` each; pipeline ends excepted), on the first stage the
embedding's indices and mask (``9/s``), on the last the final norm (as above), its gathered
output under ``sp`` and the loss's softmax, label index and masks (``4·V' + 10``). 1F1B keeps
``pp − σ`` micro-batches in flight on stage ``σ``. On top of them, while one micro-batch runs
(:func:`transient_bytes_per_token`): the backward of one layer materialises about as much as
that layer keeps without recomputation (its recomputed activations, their gradients), and the
last stage's loss holds the logits and three fp32 copies of them (``b·V' + 12·V'``, plus
``4·V'`` for the fp32 copy of bf16 logits) at its peak. So a micro-batch of ``T`` tokens
costs stage ``σ``::

    activations(σ, T) = t·((pp − σ)·kept(σ) + transient(σ))

Worked example, Llama-7B, scheme ``(1,8,1)``, bf16 (``b = 2``), ``T = 4096``: per layer
``2·(8·4096 + 4 + 2·4096) + 8·512 + 2·512 + 8·512 + 2·2·512 + 2·512 + 16 + 4·2·1376``
``= 81,928 + 10,240 + 2,048 + 1,040 + 11,008 = 106,264`` bytes per token; 32 layers, the
tables, the embedding and the head (``4·4000 + 10``) bring the stage to ``3.42 MB`` per token,
the transient to ``(106,264 + 14·4000) = 162 KB``: ``4096·3.58 MB ≈ 14.7 GB``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hydraulis.runtime.optimizer.sharding import unit_range
from hydraulis.types import ModelSpec, Recompute, Scheme

FP32 = 4
EMBEDDING_BYTES = 9
"""The embedding's local indices (int64) and outside-vocabulary mask (bool) per token."""
LOSS_BYTES = 10
"""The loss's label index (int64) and two masks (bool) per token."""


@dataclass(frozen=True)
class Widths:
    """One tp rank's widths of ``model`` under ``scheme`` (module docstring)."""

    hidden: int
    query: int
    kv: int
    ffn: int
    heads: int
    vocab: int
    head_dim: int
    sequence_shards: int
    context: int

    @classmethod
    def of(cls, model: ModelSpec, scheme: Scheme) -> Widths:
        tp, d = scheme.tp, model.head_dim
        return cls(model.hidden, model.heads // tp * d, unit_range(model.kv_heads, tp, 0)[1] * d,
                   model.ffn_hidden // tp, model.heads // tp, model.vocab // tp, d, tp if scheme.sp else 1, scheme.cp)


def layer_bytes_per_token(widths: Widths, recompute: Recompute, dtype_bytes: int) -> float:
    """What one decoder layer keeps, bytes per token of the rank (module docstring)."""
    h, b, s = widths.hidden, dtype_bytes, widths.sequence_shards
    if recompute is Recompute.FULL:
        return b * h / s
    norms = 2 * _norm(h, b) / s + (2 * b * h if s > 1 else 0)
    rotary = 8 * widths.query + b * widths.query + 8 * widths.kv
    keys = widths.context * 2 * b * widths.kv
    attention = b * widths.query + (FP32 * widths.heads if recompute is Recompute.NONE else 0)
    return norms + rotary + keys + attention + 4 * b * widths.ffn


def micro_batch_bytes_per_token(widths: Widths, layers: Sequence[Recompute], first: bool, last: bool,
                                dtype_bytes: int) -> float:
    """What a stage of ``layers`` (each layer's recomputation) keeps per micro-batch, bytes per
    token of the rank."""
    h, b, s = widths.hidden, dtype_bytes, widths.sequence_shards
    kept = sum(layer_bytes_per_token(widths, recompute, b) for recompute in layers) + 2 * FP32 * widths.head_dim
    kept += (EMBEDDING_BYTES / s) if first else b * h / s
    if last:
        kept += _norm(h, b) / s + (b * h if s > 1 else 0) + FP32 * widths.vocab + LOSS_BYTES
    else:
        kept += b * h / s
    return kept


def transient_bytes_per_token(widths: Widths, last: bool, dtype_bytes: int) -> float:
    """The working set of one micro-batch on top of what the stage keeps (module docstring)."""
    b = dtype_bytes
    layer = layer_bytes_per_token(widths, Recompute.NONE, b)
    loss = (b + 3 * FP32 + (FP32 if b < FP32 else 0)) * widths.vocab if last else 0.0
    return layer + loss


def stage_bytes_per_token(model: ModelSpec, scheme: Scheme, layers: Sequence[Recompute], stage: int,
                          dtype_bytes: int) -> float:
    """``activations(σ, T)/T`` of the module docstring for stage ``stage`` of ``scheme`` whose
    layers recompute ``layers``: bytes per token of the micro-batch (all cp ranks' tokens)."""
    widths = Widths.of(model, scheme)
    first, last = stage == 0, stage == scheme.pp - 1
    per_token = ((scheme.pp - stage) * micro_batch_bytes_per_token(widths, layers, first, last, dtype_bytes)
                 + transient_bytes_per_token(widths, last, dtype_bytes))
    return per_token / scheme.cp


def stage_activation_bytes(model: ModelSpec, scheme: Scheme, layers: Sequence[Recompute], stage: int,
                           tokens: int, dtype_bytes: int) -> int:
    """``activations(σ, T)`` with micro-batches of ``T = tokens`` tokens."""
    return math.ceil(tokens * stage_bytes_per_token(model, scheme, layers, stage, dtype_bytes))


def _norm(hidden: int, dtype_bytes: int) -> float:
    """An RMSNorm's kept bytes per token: fp32 input and normalised rows, 1/rms, the output."""
    return 2 * FP32 * hidden + FP32 + dtype_bytes * hidden
