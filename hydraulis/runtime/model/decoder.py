"""The Llama-style decoder (Touvron et al. 2023), as one pipeline stage of one rank.

Per layer, on a packed micro-batch ``x`` of ``T`` tokens × ``H``::

    x ← x + W_o · Attn(RoPE(W_q·n), RoPE(W_k·n), W_v·n),   n = RMSNorm_attn(x)
    x ← x + W_down · (silu(W_gate·m) ⊙ W_up·m),             m = RMSNorm_mlp(x)

The norms, rotary positions, grouped-query attention, SwiGLU MLP, embedding, head and loss:
:class:`DecoderLayer`. A stage sharded for its tp rank, the scheme's options (``sp``,
``recompute``) and what a layer keeps for its backward: :class:`StageModel`; ``compile_layers``:
:meth:`DecoderLayer.compile`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from hydraulis.base.types import ModelSpec, Recompute
from hydraulis.runtime.model.attention import packed_attention
from hydraulis.runtime.model.moe import MixtureOfExperts
from hydraulis.runtime.model.packing import PackedMicroBatch
from hydraulis.runtime.model.vocab_loss import VocabLoss
from hydraulis.runtime.parallel.columns import column_parallel
from hydraulis.runtime.parallel.context import start_gather_from_context
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.tensor import (
    IGNORE_INDEX,
    ColumnParallelLinear,
    RowParallelLinear,
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
)
from hydraulis.sharding.parameters import Shard, unit_range
from hydraulis.sharding.pipeline import PipelineSplit

Rope = tuple[torch.Tensor, torch.Tensor]
"""``cos, sin`` tables of a micro-batch's token positions."""


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float, **factory) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(hidden, **factory))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = at_least_fp32(x)
        y = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (y * at_least_fp32(self.weight)).to(x.dtype)


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in fp32, or as is when wider (norms, rotary and loss never run in half precision)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def rotary_tables(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> Rope:
    """``cos, sin`` of ``p·θ^(−2i/d)`` for every token position ``p``, shaped ``[T, 1, d]``, in
    fp32 or ``dtype`` when wider."""
    wide = torch.promote_types(dtype, torch.float32)
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=wide) / head_dim)
    angles = positions.to(wide).unsqueeze(-1) * inv_freq
    angles = torch.cat((angles, angles), dim=-1).unsqueeze(1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, tables: Rope) -> torch.Tensor:
    """Rotate ``x: [T, heads, d]`` by the tables (rotate-half form)."""
    cos, sin = tables
    wide = at_least_fp32(x)
    first, second = wide.chunk(2, dim=-1)
    return (wide * cos + torch.cat((-second, first), dim=-1) * sin).to(x.dtype)


def recomputed(function, *args):
    """``function(*args)`` whose activations are computed again in the backward instead of kept."""
    return checkpoint(function, *args, use_reentrant=False, preserve_rng_state=False)


class Attention(nn.Module):
    def __init__(self, model: ModelSpec, tp: ParallelGroup, cp: ParallelGroup, sequence_parallel: bool = False,
                 recompute_core: bool = False, **factory) -> None:
        super().__init__()
        self.tp, self.cp, self.head_dim = tp, cp, model.head_dim
        self.sequence_parallel, self.recompute_core = sequence_parallel, recompute_core
        self.heads = model.heads // tp.size
        self.kv_heads = unit_range(model.kv_heads, tp.size, tp.rank)[1]
        self.wq = ColumnParallelLinear(model.hidden, self.heads * model.head_dim, tp, sequence_parallel, **factory)
        self.wk = ColumnParallelLinear(model.hidden, self.kv_heads * model.head_dim, tp, sequence_parallel, **factory)
        self.wv = ColumnParallelLinear(model.hidden, self.kv_heads * model.head_dim, tp, sequence_parallel, **factory)
        self.fused_children = (self.wq, self.wk, self.wv)
        self.wo = RowParallelLinear(self.heads * model.head_dim, model.hidden, tp, sequence_parallel, **factory)
        self.attend = packed_attention
        if model.qk_norm:
            self.q_norm = RMSNorm(model.head_dim, model.norm_eps, **factory)
            self.k_norm = RMSNorm(model.head_dim, model.norm_eps, **factory)

    def forward(self, x: torch.Tensor, batch: PackedMicroBatch, rope: Rope) -> torch.Tensor:
        q, k, v = column_parallel(x, [layer.weight for layer in self.fused_children], self.tp, self.sequence_parallel)
        tokens = q.shape[0]
        q, k = q.view(tokens, self.heads, self.head_dim), k.view(tokens, self.kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        k = apply_rotary(k, rope)
        gathering = start_gather_from_context(torch.cat((k, v.view(tokens, self.kv_heads, self.head_dim)), dim=1),
                                              self.cp)
        q = apply_rotary(q, rope)
        k, v = gathering().split(self.kv_heads, dim=1)
        if self.recompute_core:
            return self.wo(recomputed(self.attend, q, k, v, batch.attention))
        return self.wo(self.attend(q, k, v, batch.attention))


class MLP(nn.Module):
    def __init__(self, model: ModelSpec, tp: ParallelGroup, sequence_parallel: bool = False, width: int | None = None,
                 **factory) -> None:
        super().__init__()
        self.tp, self.sequence_parallel = tp, sequence_parallel
        width = (width or model.ffn_hidden) // tp.size
        self.gate = ColumnParallelLinear(model.hidden, width, tp, sequence_parallel, **factory)
        self.up = ColumnParallelLinear(model.hidden, width, tp, sequence_parallel, **factory)
        self.fused_children = (self.gate, self.up)
        self.down = RowParallelLinear(width, model.hidden, tp, sequence_parallel, **factory)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = column_parallel(x, [layer.weight for layer in self.fused_children], self.tp, self.sequence_parallel)
        return self.down(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    """One layer: the two residual blocks of the module docstring's formula.

    RMSNorm ``y = x / √(mean(x²) + ε) · w`` (Zhang & Sennrich 2019, ε = ``model.norm_eps``, 1e-5 in
    Llama 2); rotary positions (Su et al. 2021, base θ = ``model.rope_theta``, 10000 in Llama 2)
    from each token's position *inside its document*; grouped-query attention with ``kv_heads``
    key/value heads, each shared by ``heads/kv_heads`` query heads; SwiGLU MLP (Shazeer 2020). The
    token embedding and the output head are separate ``V × H`` matrices; the loss is the per-token
    cross-entropy of the next token.
    """

    def __init__(self, model: ModelSpec, tp: ParallelGroup, cp: ParallelGroup, sequence_parallel: bool = False,
                 recompute: Recompute = Recompute.NONE, expert_parallel: int = 1, **factory) -> None:
        super().__init__()
        self.recompute, self.tp_rank = recompute, tp.rank
        self.attn_norm = RMSNorm(model.hidden, model.norm_eps, **factory)
        self.attn = Attention(model, tp, cp, sequence_parallel, recompute is Recompute.SELECTIVE, **factory)
        self.mlp_norm = RMSNorm(model.hidden, model.norm_eps, **factory)
        if model.is_moe:
            shared = MLP(model, tp, sequence_parallel, model.shared_experts * model.ffn_hidden, **factory)
            groups = (cp, tp) if sequence_parallel else (cp,)
            experts = tp if expert_parallel > 1 else ParallelGroup.single()
            self.moe = MixtureOfExperts(model, groups, experts, shared if model.shared_experts else None, **factory)
        else:
            self.mlp = MLP(model, tp, sequence_parallel, **factory)

    def forward(self, x: torch.Tensor, batch: PackedMicroBatch, rope: Rope) -> torch.Tensor:
        if self.recompute is Recompute.FULL:
            return recomputed(self._forward, x, batch, rope)
        return self._forward(x, batch, rope)

    def _forward(self, x: torch.Tensor, batch: PackedMicroBatch, rope: Rope) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), batch, rope)
        if hasattr(self, "moe"):
            real, documents = _token_documents(batch, x.shape[0], self.tp_rank)
            return x + self.moe(self.mlp_norm(x), real, documents, batch.cu_seqlens.numel() - 1)
        return x + self.mlp(self.mlp_norm(x))

    def compile(self) -> None:
        """Compile this layer's computation, the attention core left out.

        With ``compile_layers`` (``hydraulis train --compile``; off by default until a GPU run shows
        it pays) each decoder layer's computation is compiled by ``torch.compile`` (dynamic shapes:
        every micro-batch has its own token count), fusing the norms', rotary and SwiGLU elementwise
        operations into a few kernels — fewer launches per micro-batch. The attention core stays
        outside the compiled graphs (its plan changes with every micro-batch), and the weights of a
        compiled stage are propagated whole before its forward (the per-module pre-hooks that
        deliver them would be traced into the graphs).
        """
        self.attn.attend = torch.compiler.disable(packed_attention)
        self._forward = torch.compile(self._forward, dynamic=True)


def _token_documents(batch: PackedMicroBatch, rows: int, tp_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Of the ``rows`` tokens a rank holds between blocks (its share under sequence parallelism),
    which are not padding and each one's document (0, 1, …: a document starts where the positions
    stop rising, which holds for a cp rank's chunks too)."""
    positions = batch.positions
    documents = torch.cat((positions.new_zeros(1), torch.cumsum(positions[1:] <= positions[:-1], 0)))
    real = batch.labels != IGNORE_INDEX
    if rows != real.shape[0]:
        shares = real.shape[0] // rows
        real, documents = real.chunk(shares)[tp_rank], documents.chunk(shares)[tp_rank]
    return real, documents


def _fused_blocks(layer: DecoderLayer) -> list[nn.Module]:
    """The layer's blocks whose column weights share one storage: attention's Q/K/V, the dense
    MLP's (or a mixture's shared experts') gate/up."""
    mlp = layer.moe.shared if hasattr(layer, "moe") else layer.mlp
    return [block for block in (layer.attn, mlp) if block is not None]


def layer_recompute(layout: PipelineSplit, stage: int) -> dict[int, Recompute]:
    """What each decoder layer of ``stage`` recomputes: the scheme's option, for every layer, or
    with ``recompute=full:K`` full recomputation for the stage's first ``K`` layers only
    (:meth:`~hydraulis.base.scheme.Scheme.stage_recompute`)."""
    layers = layout.stage_range(stage)
    return dict(zip(layers, layout.scheme.stage_recompute(stage, len(layers))))


class StageModel(nn.Module):
    """Stage ``stage`` of a pipeline laid out as ``layout``, sharded for tp rank ``tp.rank``.

    ``forward`` takes the received hidden states (None on the first stage, which embeds the
    micro-batch's tokens) and returns the hidden states to send on, or, on the last stage, the
    per-token loss of this rank's tokens — summed, ``Σ_t ℓ_t`` (fp32), computed ``loss_chunk``
    tokens at a time (:mod:`~hydraulis.runtime.model.vocab_loss`; 0: all at once, the
    ``[T × V/tp]`` logits in fp32); ``compile_layers``: each decoder layer compiled
    (:meth:`DecoderLayer.compile`).

    A :class:`StageModel` holds the layers of one stage, sharded for its tp rank
    (:mod:`hydraulis.sharding.parameters`), and communicates through its tp and cp groups; with
    trivial groups and one stage of all layers it is the single-device model, which is how the
    equivalence check's reference runs. A block's column-parallel linears (Q/K/V, gate/up, the
    head alone) run as one function with the block's entry into the tensor-parallel region
    (:mod:`hydraulis.runtime.parallel.columns`: the input gradient's all-reduce overlaps their
    weight gradients); a module that runs its children's weights so, without calling them, names
    them ``fused_children`` (the forward pre-hooks that deliver weights go on it,
    :class:`~hydraulis.runtime.optimizer.exchange.WeightGate`). The scheme's options shape it:

    * ``sp`` (:mod:`hydraulis.runtime.parallel.sequence`): the residual stream, the norms and the
      hand-offs between stages hold ``T/tp`` tokens per tp rank; each block is entered by an
      all-gather and left by a reduce-scatter instead of an identity and an all-reduce;
    * ``recompute`` per layer (:func:`layer_recompute`: every layer of the stage gets the scheme's,
      or under ``recompute=full:K`` the stage's first ``K`` layers ``full`` and the others none):
      ``selective`` runs the attention core under :func:`torch.utils.checkpoint.checkpoint`,
      ``full`` the whole layer — its forward runs again in the backward, collectives included, on
      every rank of the tp and cp groups in the same order.

    **What a layer keeps for its backward**, per token of a micro-batch on one rank (``t = T/cp``
    tokens; ``s = tp`` under sequence parallelism, else 1; ``H`` hidden, ``F`` MLP width,
    ``q = heads·d`` and ``k = kv_heads·d`` with ``d`` the head size, ``h`` the query heads; counts
    of elements in the compute dtype unless marked fp32), measured by counting the storages autograd
    saves (:mod:`torch.autograd.graph.saved_tensors_hooks`;
    ``tests/runtime/model/test_decoder_options.py``):

    =============  ====================================================================================
    recompute      elements kept per token, per layer
    =============  ====================================================================================
    ``none``       residual side, ``t/s`` rows: per norm (two) its fp32 input (the input itself when the
                   compute dtype is fp32), its normalised fp32 ``y``, the fp32 ``1/rms`` and its output
                   — ``2·(3·H + 1)``; tensor-parallel side, ``t`` rows per tp rank: under sp the two
                   gathered norm outputs (``2·H``), Q after rotary (``q/tp``), the cp-gathered K and V
                   (``2·cp·k/tp``), the attention output (``q/tp``) and its log-sum-exp (``h/tp``,
                   fp32), the MLP's gate and up outputs, silu(gate) and their product (``4·F/tp``)
    ``selective``  the same without the log-sum-exp (the attention core's inputs Q, K, V are kept as
                   its checkpoint's inputs, its output as the output projection's input)
    ``full``       the layer's input only (``H/s``)
    =============  ====================================================================================

    Per micro-batch in flight the stage also keeps the rotary tables (``2·d`` fp32 per token, shared
    by its layers), the attention plan (index vectors, linear in ``t``), on the last stage the final
    norm's tensors (as one norm above) and the head's fp32 softmax (``V/tp`` per token) — with the
    loss in chunks, the input gradient of the head instead (``H`` per token) and the head's fp32
    weight gradient (:mod:`~hydraulis.runtime.model.vocab_loss`). Attention keeps nothing of size
    queries × keys (:mod:`hydraulis.runtime.model.attention`).
    """

    def __init__(self, model: ModelSpec, layout: PipelineSplit, stage: int, tp: ParallelGroup,
                 cp: ParallelGroup, dtype: torch.dtype, device: torch.device, compile_layers: bool = False,
                 loss_chunk: int = 0) -> None:
        super().__init__()
        ep = layout.scheme.ep
        if 1 < ep < tp.size:
            raise NotImplementedError(f"expert parallelism over part of the tp group ({layout.scheme}) is planned, "
                                      "not yet run: the runtime folds ep = tp")
        factory = {"dtype": dtype, "device": device}
        self.model, self.tp = model, tp
        self.sequence_parallel = layout.scheme.sp
        self.first, self.last = stage == 0, stage == layout.scheme.pp - 1
        if self.first:
            self.embed = VocabParallelEmbedding(model.vocab, model.hidden, tp, self.sequence_parallel, **factory)
        self.layers = nn.ModuleDict({str(i): DecoderLayer(model, tp, cp, self.sequence_parallel, recompute, ep, **factory)
                                     for i, recompute in layer_recompute(layout, stage).items()})
        if self.last:
            self.norm = RMSNorm(model.hidden, model.norm_eps, **factory)
            first, count = unit_range(model.vocab, tp.size, tp.rank)
            self.vocab_start = first
            self.head = ColumnParallelLinear(model.hidden, count, tp, self.sequence_parallel, **factory)
            self.vocab_loss = (VocabLoss(self.head, tp, self.sequence_parallel, first, loss_chunk) if loss_chunk
                               else None)
        self.shapes = {name: param.shape for name, param in self.named_parameters()}
        self.fuse_storage()
        self.compiled = compile_layers
        for layer in self.layers.values() if compile_layers else ():
            layer.compile()

    def count_loss_tokens(self, tokens: int) -> None:
        """The step's loss tokens ``N``, for a mixture of experts' balance loss (:mod:`.moe`)."""
        for moe in self.mixtures:
            moe.count_loss_tokens(tokens)

    @property
    def mixtures(self) -> list[MixtureOfExperts]:
        """The stage's mixtures of experts (none for a dense model)."""
        return [layer.moe for layer in self.layers.values() if hasattr(layer, "moe")]

    def forward(self, hidden: torch.Tensor | None, batch: PackedMicroBatch) -> torch.Tensor:
        """The module docstring's forward; a mixture of experts records its statistics during it
        (not when a recomputed layer runs again in the backward)."""
        for moe in self.mixtures:
            moe.recording = True
        try:
            return self._forward(hidden, batch)
        finally:
            for moe in self.mixtures:
                moe.recording = False

    def _forward(self, hidden: torch.Tensor | None, batch: PackedMicroBatch) -> torch.Tensor:
        x = self.embed(batch.input_ids) if self.first else hidden
        rope = rotary_tables(batch.positions, self.model.head_dim, self.model.rope_theta, x.dtype)
        for layer in self.layers.values():
            x = layer(x, batch, rope)
        if not self.last:
            return x
        if self.vocab_loss is not None:
            return self.vocab_loss(self.norm(x), batch.labels)
        logits = self.head(self.norm(x))
        return vocab_parallel_cross_entropy(logits, batch.labels, self.tp, self.vocab_start).sum()

    def fuse_storage(self) -> None:
        """Lay each block's column weights (Q/K/V; gate/up) out as consecutive rows of one
        storage, each still its own parameter (:mod:`hydraulis.runtime.parallel.columns`: one
        product for all); their values are left unset, as a new module's."""
        for layer in self.layers.values():
            for block in _fused_blocks(layer):
                weights = [child.weight for child in block.fused_children]
                storage = weights[0].new_empty((sum(w.shape[0] for w in weights), weights[0].shape[1]))
                for weight, rows in zip(weights, storage.split([w.shape[0] for w in weights])):
                    weight.data = rows

    def allocate(self) -> None:
        """Storage for every parameter released (``param.data`` emptied by a strategy switch),
        its values unset, the blocks' column weights fused again."""
        for name, param in self.named_parameters():
            if param.numel() == 0:
                param.data = param.data.new_empty(self.shapes[name])
        self.fuse_storage()

    @property
    def sequence_shards(self) -> int:
        """How many ranks share a micro-batch's tokens between the blocks (tp under sp, else 1)."""
        return self.tp.size if self.sequence_parallel else 1

    def shard_parameters(self, shards: tuple[Shard, ...]) -> list[nn.Parameter]:
        """This stage's parameters in the order of ``shards`` (its shards, :func:`~hydraulis.sharding.parameters.stage_shards`)."""
        params = dict(self.named_parameters())
        if set(params) != {s.name for s in shards}:
            raise RuntimeError(f"stage parameters {sorted(params)} differ from its shards")
        return [params[shard.name] for shard in shards]
