"""Activations: what one rank of a pipeline stage keeps for its backward, per token (design §6.4).

A micro-batch of ``T`` tokens puts ``t = T/cp`` on each rank (context parallelism splits the
tokens); between the blocks a rank holds ``t/s`` of them, ``s = tp`` under sequence
parallelism (``sp``), else 1 (``tp`` the stage's own, ``tp_σ`` of a staged scheme, design §9.2).
Widths per tp rank: ``H`` hidden, ``q = h_q·d/tp`` query,
``k = d·max(h_kv/tp, 1)`` key/value, ``F' = F/tp`` MLP, ``h = h_q/tp`` heads, ``V' = V/tp``
vocabulary; ``b`` bytes per element of the compute dtype (2 bf16, 4 fp32). What autograd keeps
of one decoder layer, bytes per token of ``t`` (:func:`layer_bytes_per_token`)::

The details: :func:`layer_bytes_per_token`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hydraulis.base.types import ModelSpec, Recompute, Scheme
from hydraulis.sharding.parameters import unit_range

FP32 = 4
EMBEDDING_BYTES = 9
"""The embedding's local indices (int64) and outside-vocabulary mask (bool) per token."""
LOSS_BYTES = 10
"""The loss's label index (int64) and two masks (bool) per token."""
CHUNKED_LOSS_ROWS = 2
"""Rows of ``b·H`` bytes per token alive during the chunked loss's forward besides what the stage
keeps: the final norm's input and output (counted on the meta device)."""


@dataclass(frozen=True)
class Widths:
    """One tp rank's widths of ``model`` under ``scheme`` (:func:`layer_bytes_per_token`)."""

    hidden: int
    query: int
    kv: int
    ffn: int
    heads: int
    vocab: int
    head_dim: int
    sequence_shards: int
    context: int
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    routed_shards: int = 1
    imbalance: float = 1.0

    @classmethod
    def of(cls, model: ModelSpec, scheme: Scheme, stage: int = 0) -> Widths:
        """The widths of a tp rank of ``stage`` (the same on every stage but of a staged scheme)."""
        tp, d = scheme.stage_tp(stage), model.head_dim
        mlp = model.shared_experts * model.ffn_hidden if model.is_moe else model.ffn_hidden
        return cls(model.hidden, model.heads // tp * d, unit_range(model.kv_heads, tp, 0)[1] * d,
                   mlp // tp, model.heads // tp, model.vocab // tp, d, tp if scheme.sp else 1, scheme.cp,
                   model.experts, model.top_k, model.ffn_hidden if model.is_moe else 0,
                   tp if scheme.sp else 1, model.routing_imbalance if scheme.ep > 1 else 1.0)


def layer_bytes_per_token(widths: Widths, recompute: Recompute, dtype_bytes: int, repeat_kv: bool = False) -> float:
    """What one decoder layer keeps, bytes per token of the rank; with ``repeat_kv`` the attention
    kernel keeps K and V repeated to the query heads (a kernel without grouped-query attention:
    ``cp·2·b·q`` instead of ``cp·2·b·k``).

        recompute none:
            2 norms            2·((4H + 4H + 4)/s + b·H)   fp32 input and normalised rows and 1/rms
                                                           on t/s tokens; the output the block's
                                                           linears keep (gathered under sp)
            K and V over cp    cp·2·b·k                    gathered for the attention core
            attention          2·b·q + 4h                  rotated Q, output; log-sum-exp (fp32)
            MLP                4·b·F'                      gate, up, silu, their product (of a mixture
                                                           of experts: its shared experts, F = n_s·F_e)
            routed experts     (4E + 12k + ρ·k·(2·b·H + 4·b·F_e))/s_m      a mixture's router
                                                           probabilities, top-k weights and indices,
                                                           and per routed copy its input, gate, up,
                                                           silu, product and output (:func:`routed_bytes_per_token`)
        recompute selective: none's bytes without the log-sum-exp (the core runs again)
        recompute full:      b·H/s, the layer's input

    (rotary embeddings keep nothing per layer: their products with the constant tables need only
    the tables.) The attention core keeps what FlashAttention keeps (Dao 2023): Q, K, V, its output
    and the log-sum-exp of each query row — never the ``s²`` scores. A stage keeps per micro-batch
    (:func:`micro_batch_bytes_per_token`) its layers' bytes; the rotary tables (``8d``: fp32 cos
    and sin, shared by its layers); the output it sent (``b·H/s``) but on the last stage; the input
    it received (``b·H/s``) but on the first stage, in fp32 (where it is the first norm's fp32
    input) or when the first layer recomputes fully (where it is that layer's input); on the first
    stage the embedding's indices and mask (``9``); on the last the final norm (as a layer's) and
    the loss's softmax, label index and masks (``4·V' + 10``). 1F1B keeps ``pp − σ`` micro-batches
    in flight on stage ``σ``. On top of them one micro-batch's working set
    (:func:`transient_bytes_per_token`) is the larger of

    * a layer's backward: the larger of the MLP's (``b·(2·F' + H)``: gradients of gate and up and
      of the block's input) on top of what the layer computes again — the attention core's output
      and log-sum-exp under ``selective``, all of ``none``'s bytes under ``full`` — and a norm's
      (``(12 + [b < 4]·2b)·H/s``: fp32 gradients);
    * on the last stage, the loss's forward: the logits, their shifted and exponentiated fp32
      copies (and the fp32 copy of bf16 logits), ``(b + 8 + [b < 4]·4)·V'``.

    So a micro-batch of ``T`` tokens costs stage ``σ``::

        activations(σ, T) = t·((pp − σ)·kept(σ) + transient(σ))

    Every term is composable per layer: a stage whose layers recompute differently sums their
    bytes. ``tests/runtime/memory/test_activations.py`` measures the runtime against it on the CPU
    (with a stand-in core that keeps what FlashAttention keeps): what stays allocated after a
    forward to within 1 %, the peak of a 1F1B run to within 10 % (−1.3 to +2.6 % on the
    configurations tried; a last stage was 1.7–5.0 % over while the runtime held the gradient it
    had sent through the next forward).

    Worked example, Llama-7B, scheme ``(1,8,1)``, bf16 (``b = 2``), ``T = 4096``: per layer
    ``2·((8·4096 + 4) + 2·4096) + 2·2·512 + (2·2·512 + 4·4) + 4·2·1376 = 97,048`` bytes per token;
    32 layers, the tables (1,024), the embedding (9), the final norm (40,964) and the loss
    (``4·4000 + 10``) make ``3,163,543``; the transient is the norm's ``16·4096 = 65,536``
    (the loss's ``14·4000`` is smaller), so ``4096·3,229,079 ≈ 13.2 GB``.
    """
    h, b, s = widths.hidden, dtype_bytes, widths.sequence_shards
    if recompute is Recompute.FULL:
        return b * h / s
    norms = 2 * _norm(h, b, s)
    keys = widths.context * 2 * b * (max(widths.kv, widths.query) if repeat_kv else widths.kv)
    attention = 2 * b * widths.query + (FP32 * widths.heads if recompute is Recompute.NONE else 0)
    return norms + keys + attention + 4 * b * widths.ffn + routed_bytes_per_token(widths, b)


def routed_bytes_per_token(widths: Widths, dtype_bytes: int) -> float:
    """What a mixture of experts' router and routed experts keep, bytes per token of the rank:
    ``(4E + 12k + ρ·k·(2·b·H + 4·b·F_e))/s_m`` (0 for a dense model), ``s_m`` the ranks that split
    the tokens for the routed experts (tp under sp), ``ρ`` the routing
    imbalance under expert parallelism (the most loaded rank's copies over the mean)."""
    if not widths.experts:
        return 0.0
    k, b = widths.top_k, dtype_bytes
    copies = widths.imbalance * k * (2 * b * widths.hidden + 4 * b * widths.expert_ffn)
    return (FP32 * widths.experts + 12 * k + copies) / widths.routed_shards


def micro_batch_bytes_per_token(widths: Widths, layers: Sequence[Recompute], first: bool, last: bool,
                                dtype_bytes: int, loss_chunk: int = 0, repeat_kv: bool = False) -> float:
    """What a stage of ``layers`` (each layer's recomputation) keeps per micro-batch, bytes per
    token of the rank (the loss in chunks of ``loss_chunk`` tokens also keeps
    :func:`loss_fixed_bytes`, whatever the tokens)."""
    h, b, s = widths.hidden, dtype_bytes, widths.sequence_shards
    kept = (sum(layer_bytes_per_token(widths, recompute, b, repeat_kv) for recompute in layers)
            + 2 * FP32 * widths.head_dim)
    if first:
        kept += EMBEDDING_BYTES
    elif b < FP32 and layers[0] is not Recompute.FULL:
        kept += b * h / s
    if last:
        kept += _norm(h, b, s) + loss_kept_bytes_per_token(widths, loss_chunk)
    else:
        kept += b * h / s
    return kept


def transient_bytes_per_token(widths: Widths, layers: Sequence[Recompute], last: bool, dtype_bytes: int,
                              loss_chunk: int = 0, repeat_kv: bool = False) -> float:
    """The working set of one micro-batch on top of what the stage keeps (:func:`layer_bytes_per_token`): the
    larger of the loss's forward and a layer's backward (on the last stage the latter comes once
    the loss and the final norm have released what they kept); in chunks, the loss's forward
    also holds :func:`loss_chunk_pieces`."""
    backward = max(max(layer_backward_bytes_per_token(widths, recompute, dtype_bytes, repeat_kv) for recompute in layers),
                   norm_backward_bytes_per_token(widths, dtype_bytes))
    if not last:
        return backward
    return max(loss_bytes_per_token(widths, dtype_bytes, loss_chunk),
               backward - released_bytes_per_token(widths, dtype_bytes, loss_chunk))


def layer_backward_bytes_per_token(widths: Widths, recompute: Recompute, dtype_bytes: int,
                                   repeat_kv: bool = False) -> float:
    """One layer's backward working set: its MLP's gradients and what it recomputes."""
    b = dtype_bytes
    recomputed = {Recompute.NONE: 0.0, Recompute.SELECTIVE: b * widths.query + FP32 * widths.heads,
                  Recompute.FULL: layer_bytes_per_token(widths, Recompute.NONE, b, repeat_kv)}[recompute]
    routed = widths.imbalance * widths.top_k * b * (2 * widths.expert_ffn + widths.hidden) / widths.routed_shards
    return b * (2 * widths.ffn + widths.hidden) + routed + recomputed


def norm_backward_bytes_per_token(widths: Widths, dtype_bytes: int) -> float:
    """A norm's backward working set."""
    return (3 * FP32 + (2 * dtype_bytes if dtype_bytes < FP32 else 0)) * widths.hidden / widths.sequence_shards


def loss_bytes_per_token(widths: Widths, dtype_bytes: int, loss_chunk: int = 0) -> float:
    """The loss's forward working set on the last stage: all logits at once, or in chunks the
    rows around them (the final norm's input and output, ``CHUNKED_LOSS_ROWS·b·H``) besides
    :func:`loss_chunk_pieces`."""
    if loss_chunk:
        return CHUNKED_LOSS_ROWS * dtype_bytes * widths.hidden
    return (dtype_bytes + 2 * FP32 + (FP32 if dtype_bytes < FP32 else 0)) * widths.vocab


def loss_kept_bytes_per_token(widths: Widths, loss_chunk: int = 0) -> float:
    """What the loss keeps per token: the fp32 softmax, the label index and masks; in chunks
    nothing beyond the head's input gradient, which takes the place of the final norm's output
    that the head would keep (counted in the norm's bytes)."""
    return 0.0 if loss_chunk else FP32 * widths.vocab + LOSS_BYTES


def loss_chunk_pieces(widths: Widths, dtype_bytes: int) -> tuple[tuple[float, float], ...]:
    """The working set of one chunk of ``c`` rows as the largest of affine pieces ``p·c + q``: its
    logits and their fp32 copy, whose exponentials become ``G``, ``(4 + b)·c·V'`` (``4·c·V'`` in
    fp32), or below fp32 ``G`` and the chunk's weight gradient before its fp32 sum, ``b·(H + c)·V'``."""
    b, vocab = dtype_bytes, widths.vocab
    if b >= FP32:
        return ((FP32 * vocab, 0.0),)
    return ((FP32 + b) * vocab, 0.0), (b * vocab, b * widths.hidden * vocab)


def loss_fixed_bytes(widths: Widths, loss_chunk: int) -> float:
    """What the loss in chunks keeps per micro-batch whatever its tokens: the head's weight
    gradient summed in fp32, ``4·V'·H``. 0 without chunks."""
    return FP32 * widths.vocab * widths.hidden if loss_chunk else 0.0


def released_bytes_per_token(widths: Widths, dtype_bytes: int, loss_chunk: int = 0) -> float:
    """What the last stage's final norm and loss have released before its layers' backward."""
    return _norm(widths.hidden, dtype_bytes, widths.sequence_shards) + loss_kept_bytes_per_token(widths, loss_chunk)


def stage_bytes_per_token(model: ModelSpec, scheme: Scheme, layers: Sequence[Recompute], stage: int,
                          dtype_bytes: int, loss_chunk: int = 0, repeat_kv: bool = False) -> float:
    """``activations(σ, T)/T`` of :func:`layer_bytes_per_token` for stage ``stage`` of ``scheme`` whose
    layers recompute ``layers``: bytes per token of the micro-batch (all cp ranks' tokens),
    without the loss's fixed bytes in chunks (:func:`stage_activation_bytes` has them)."""
    widths = Widths.of(model, scheme, stage)
    first, last = stage == 0, stage == scheme.pp - 1
    per_token = ((scheme.pp - stage) * micro_batch_bytes_per_token(widths, layers, first, last, dtype_bytes,
                                                                   loss_chunk, repeat_kv)
                 + transient_bytes_per_token(widths, layers, last, dtype_bytes, loss_chunk, repeat_kv))
    return per_token / scheme.cp


def stage_activation_bytes(model: ModelSpec, scheme: Scheme, layers: Sequence[Recompute], stage: int,
                           tokens: int, dtype_bytes: int, loss_chunk: int = 0, repeat_kv: bool = False) -> int:
    """``activations(σ, T)`` with micro-batches of ``T = tokens`` tokens (:func:`stage_activation_curve`)."""
    return math.ceil(stage_activation_curve(model, scheme, layers, stage, dtype_bytes, loss_chunk, repeat_kv)
                     .bytes(tokens))


def stage_activation_curve(model: ModelSpec, scheme: Scheme, layers: Sequence[Recompute], stage: int,
                           dtype_bytes: int, loss_chunk: int = 0, repeat_kv: bool = False) -> ActivationCurve:
    """``activations(σ, T)`` as a function of the micro-batch's ``T`` tokens: ``T`` times
    :func:`stage_bytes_per_token` but on the last stage with the loss in chunks of ``C`` tokens,
    where, with ``t = T/cp``, ``k`` what the stage keeps and ``w`` its working set per token,
    ``l`` the loss's rows (:func:`loss_bytes_per_token`), ``G(c)`` a chunk's working set
    (:func:`loss_chunk_pieces`) and ``F`` the head's fp32 weight gradient (:func:`loss_fixed_bytes`)::

        activations(σ, T) = k·t + F + max(w·t, l·t + G(min(C, t)))

    Worked example, Llama-7B ``1,1,1[recompute=full]`` in bf16, ``C = 1024``, ``T = 4096``: ``k = 304,141``,
    ``w = 214,148`` (a layer's backward recomputing it), ``l = 16,384``, ``G(1024) = max(6·1024,
    2·(4096 + 1024))·32,000 = 327.7 MB``, ``F = 4·32,000·4096 = 524.3 MB``: ``1,246 + 524 + max(877,
    67 + 328) = 2,647 MB`` (2.47 GiB; the backward's working set hides the chunk's)."""
    per_token = stage_bytes_per_token(model, scheme, layers, stage, dtype_bytes, loss_chunk, repeat_kv)
    if stage < scheme.pp - 1 or not loss_chunk:
        return ActivationCurve(((per_token, 0.0),))
    widths, cp = Widths.of(model, scheme, stage), scheme.cp
    working = transient_bytes_per_token(widths, layers, True, dtype_bytes, loss_chunk, repeat_kv)
    kept, loss = per_token * cp - working, loss_bytes_per_token(widths, dtype_bytes, loss_chunk)
    fixed = loss_fixed_bytes(widths, loss_chunk)
    backward = ((kept + working) / cp, fixed)
    pieces = loss_chunk_pieces(widths, dtype_bytes)
    return ActivationCurve((backward, *(((kept + loss + p) / cp, fixed + q) for p, q in pieces)),
                           (backward, *(((kept + loss) / cp, fixed + p * loss_chunk + q) for p, q in pieces)),
                           cp * loss_chunk)


@dataclass(frozen=True)
class ActivationCurve:
    """Bytes of activations with micro-batches of ``T`` tokens, the largest of affine pieces
    ``a·T + c`` (``a, c ≥ 0``): those of ``below`` while ``T < split``, those of ``above`` from it on
    (``above`` is ``below`` when omitted). Worked example: ``((100, 0),)`` holds 1,000 bytes at
    ``T = 10`` and ``longest(1,050) = 10``."""

    below: tuple[tuple[float, float], ...]
    above: tuple[tuple[float, float], ...] = ()
    split: float = math.inf

    def bytes(self, tokens: float) -> float:
        pieces = self.below if tokens < self.split or not self.above else self.above
        return max(a * tokens + c for a, c in pieces)

    def longest(self, free: float) -> int:
        """The most tokens ``T`` with ``bytes(T) ≤ free`` (0 when none): the curve rises and is
        continuous at ``split``, so past it when ``above``'s pieces allow, else ``below``'s."""
        if self.above:
            beyond = _inverse(self.above, free)
            if beyond >= self.split:
                return max(0, math.floor(beyond))
        return max(0, math.floor(min(_inverse(self.below, free), self.split)))

    def extended(self, other: ActivationCurve, steps: int) -> ActivationCurve:
        """``self + steps·(other − self)`` piece by piece (``other`` of the same pieces and split:
        a stage with one layer more)."""
        def extend(mine: tuple[tuple[float, float], ...],
                   theirs: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
            return tuple((a + steps * (x - a), c + steps * (y - c)) for (a, c), (x, y) in zip(mine, theirs))
        return ActivationCurve(extend(self.below, other.below), extend(self.above, other.above), self.split)

    def scaled(self, factor: float) -> ActivationCurve:
        """The curve times ``factor``."""
        def scale(pieces: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
            return tuple((a * factor, c * factor) for a, c in pieces)
        return ActivationCurve(scale(self.below), scale(self.above), self.split)


def _inverse(pieces: tuple[tuple[float, float], ...], free: float) -> float:
    """The largest ``T`` with every piece ``a·T + c ≤ free`` (−1 when one exceeds it at ``T = 0``)."""
    if any(c > free for _, c in pieces):
        return -1.0
    return min(((free - c) / a for a, c in pieces if a > 0), default=math.inf)


def _norm(hidden: int, dtype_bytes: int, shards: int) -> float:
    """An RMSNorm's kept bytes per token: fp32 input and normalised rows and 1/rms on the rank's
    ``1/shards`` of the tokens, and the output the next linear keeps (gathered over the tp ranks
    under sequence parallelism)."""
    return (2 * FP32 * hidden + FP32) / shards + dtype_bytes * hidden
