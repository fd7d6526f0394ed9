"""A mixture of experts in place of a decoder layer's MLP (Shazeer et al. 2017; Mixtral, Qwen3-MoE,
DeepSeekMoE), dropless: every token reaches its ``k`` experts, there is no capacity factor.

For a rank's tokens ``x: [t, H]`` (the real ones: padding never reaches an expert, its output is
0) with router ``W_r: [E, H]``::

    p = softmax(W_r·x)                         fp32, over the E experts
    (w, e) = top_k(p)                          the k largest probabilities and their experts
    w ← w / Σ w                                when ``model.normalise_top_k`` (Mixtral, Qwen3)
    y = Σ_j w_j · E_{e_j}(x) + S(x)            E_i(x) = W_down,i·(silu(W_gate,i·x) ⊙ W_up,i·x)

``S`` the shared experts (DeepSeekMoE), one SwiGLU of width ``n_s·F`` that every token runs, as the
dense model's MLP (tensor-parallel). Tokens are sorted by expert and each expert's rows multiplied
at once: torch's grouped GEMM (``torch._grouped_mm``) on CUDA, a loop over the experts elsewhere.

The load-balancing loss per document: :func:`document_balance`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from hydraulis.base.types import ModelSpec
from hydraulis.runtime.parallel.expert import combine, dispatch
from hydraulis.runtime.parallel.group import ParallelGroup


class Matrix(nn.Module):
    """One ``out × in`` weight, named ``weight`` (an expert's gate, up or down)."""

    def __init__(self, rows: int, columns: int, **factory) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, columns, **factory))


class Expert(nn.Module):
    """One routed SwiGLU expert of width ``F``, held whole."""

    def __init__(self, hidden: int, width: int, **factory) -> None:
        super().__init__()
        self.gate = Matrix(width, hidden, **factory)
        self.up = Matrix(width, hidden, **factory)
        self.down = Matrix(hidden, width, **factory)


@dataclass(frozen=True)
class Routing:
    """Each real token's ``k`` experts and weights, and the router's probabilities (fp32)."""

    weights: torch.Tensor
    experts: torch.Tensor
    probabilities: torch.Tensor


def route(logits: torch.Tensor, top_k: int, normalise: bool) -> Routing:
    """The module docstring's ``p``, top-k and normalisation."""
    probabilities = torch.softmax(logits.float(), dim=-1)
    weights, experts = torch.topk(probabilities, top_k, dim=-1)
    if normalise:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return Routing(weights, experts, probabilities)


def tokens_per_expert(experts: torch.Tensor, count: int) -> torch.Tensor:
    """How many of the routed copies each of ``count`` experts receives (int64)."""
    return torch.bincount(experts.reshape(-1), minlength=count)


def document_balance(routing: Routing, documents: torch.Tensor, document_count: int, count: int,
                     token_groups: Sequence[ParallelGroup]) -> tuple[torch.Tensor, torch.Tensor]:
    """``Σ_d n_d·aux_d`` (differentiable through this rank's probabilities) and ``Σ_d n_d`` of
    the loss below, for tokens of document ids ``documents`` (ids ``0 … document_count − 1``,
    the same numbering on every rank of ``token_groups``).

    **Load-balancing loss** (Switch Transformer, Fedus et al. 2022, eq. 4–6; Hugging Face's
    ``load_balancing_loss_func``), per document ``d`` of ``n_d`` tokens (as DeepSeek-V3's
    sequence-wise balance loss) so that it does not depend on how a step is cut into pipelines,
    micro-batches and cp or sp shares::

        aux_d = E · Σ_i f_d,i · P_d,i,   f_d,i = (times expert i is among a token's k)/n_d,   P_d,i = Σ_t p_t,i / n_d
        objective += coef · (1/L) · Σ_layers Σ_d (n_d/N) · aux_d        (N the step's loss tokens)

    A document's counts and probability sums are summed over the ranks that share its tokens
    (``token_groups``: cp, and tp under sp) before the product; each rank differentiates through its
    own tokens' probabilities only, so the sum over ranks is the gradient. The gradient enters
    through the layer's output (:class:`_AuxLoss`, as Megatron-Core's auxiliary-loss scaler); each
    layer keeps its last token-weighted mean ``aux`` and tokens per expert for the logs. Worked
    example: E = 4, k = 2, one document of 2 tokens routed to (0, 1) and (0, 2) with
    ``P = (.4, .3, .2, .1)``: ``f = (1, .5, .5, 0)``, ``aux = 4·(.4 + .15 + .1) = 2.6``.
    """
    top_k = routing.experts.shape[1]
    probabilities = routing.probabilities
    chosen = torch.zeros((document_count, count), dtype=probabilities.dtype, device=probabilities.device)
    sums = chosen.index_add(0, documents, probabilities)
    chosen.index_put_((documents.repeat_interleave(top_k), routing.experts.reshape(-1)),
                      torch.ones((), dtype=chosen.dtype), accumulate=True)
    tokens = chosen.sum(dim=1) / top_k
    whole = sums.detach().clone()
    for group in token_groups:
        group.all_reduce(chosen)
        group.all_reduce(whole)
        group.all_reduce(tokens)
    sums = sums + (whole - sums.detach())
    present = tokens > 0
    weighted = count * ((chosen * sums)[present].sum(dim=1) / tokens[present]).sum()
    return weighted, tokens.sum()


class _AuxLoss(torch.autograd.Function):
    """Identity on ``output``; in the backward ``aux`` receives the gradient ``scale``."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, torch.full((), ctx.scale, dtype=torch.float32, device=grad.device), None


def expert_outputs(x: torch.Tensor, routing: Routing, experts: list[Expert], count: int,
                   expert_group: ParallelGroup) -> torch.Tensor:
    """``Σ_j w_j·E_{e_j}(x)`` for every row of ``x``: the routed copies sorted by expert, sent to
    the ranks of ``expert_group`` holding their experts (:mod:`~hydraulis.runtime.parallel.expert`;
    ``experts`` this rank's, of ``count``), each expert's rows as one matrix product (grouped on
    CUDA), brought back and combined by index addition."""
    top_k = routing.experts.shape[1]
    order = torch.argsort(routing.experts.reshape(-1), stable=True)
    rows = order // top_k
    counts = tokens_per_expert(routing.experts, count)
    copies = x[rows]
    dispatched = None if expert_group.trivial else dispatch(copies, counts, expert_group)
    inputs, local = (copies, counts) if dispatched is None else (dispatched.rows, dispatched.local_counts)
    if _grouped(x, experts):
        hidden = _grouped_swiglu(inputs, local, experts)
    else:
        hidden = torch.cat([_swiglu(part, expert) for part, expert in zip(inputs.split(local.tolist()), experts)])
    if dispatched is not None:
        hidden = combine(hidden, dispatched, expert_group)
    weighted = hidden * routing.weights.reshape(-1)[order].unsqueeze(-1)
    return torch.zeros_like(x).index_add_(0, rows, weighted.to(x.dtype))


def _swiglu(x: torch.Tensor, expert: Expert) -> torch.Tensor:
    return F.linear(F.silu(F.linear(x, expert.gate.weight)) * F.linear(x, expert.up.weight), expert.down.weight)


def _grouped(x: torch.Tensor, experts: list[Expert]) -> bool:
    """Whether torch's grouped GEMM runs here: CUDA, and rows of 16-byte multiples."""
    first = experts[0].gate.weight
    aligned = all(size * x.element_size() % 16 == 0 for size in first.shape)
    return x.is_cuda and hasattr(torch, "_grouped_mm") and aligned


def _grouped_swiglu(copies: torch.Tensor, counts: torch.Tensor, experts: list[Expert]) -> torch.Tensor:
    offsets = torch.cumsum(counts, 0).to(torch.int32)

    def stacked(name: str) -> torch.Tensor:
        return torch.stack([getattr(e, name).weight for e in experts]).transpose(1, 2)

    gate = torch._grouped_mm(copies, stacked("gate"), offs=offsets)
    up = torch._grouped_mm(copies, stacked("up"), offs=offsets)
    return torch._grouped_mm(F.silu(gate) * up, stacked("down"), offs=offsets)


class MixtureOfExperts(nn.Module):
    """A decoder layer's mixture of experts on one rank (module docstring). ``shared`` is the
    tensor-parallel SwiGLU of the shared experts (None without), built by the caller. The block
    routes the tokens the rank holds between blocks: under sequence parallelism its share, its
    router and experts receiving partial gradients; else, with ``tp > 1``, every tp rank computes
    the same (replicated) mixture. ``token_groups`` are the groups whose ranks share a document's
    tokens (cp, and tp under sp); :meth:`count_loss_tokens` sets the step's ``N``. Under expert
    parallelism it holds the experts of its rank of ``expert_group`` (:func:`~hydraulis.sharding.parameters.held`:
    ``E/ep`` consecutive ones, named by their index in the model). It runs its
    router's and experts' weights without calling them: ``fused_children`` (the hooks that
    deliver weights go on it, :class:`~hydraulis.runtime.optimizer.exchange.WeightGate`)."""

    def __init__(self, model: ModelSpec, token_groups: Sequence[ParallelGroup], expert_group: ParallelGroup,
                 shared: nn.Module | None, **factory) -> None:
        super().__init__()
        self.model, self.token_groups, self.expert_group = model, tuple(token_groups), expert_group
        self.router = Matrix(model.experts, model.hidden, **factory)
        per_rank = model.experts // expert_group.size
        first = expert_group.rank * per_rank
        self.experts = nn.ModuleDict({str(i): Expert(model.hidden, model.ffn_hidden, **factory)
                                      for i in range(first, first + per_rank)})
        self.fused_children = (self.router, *(m for e in self.experts.values() for m in (e.gate, e.up, e.down)))
        self.shared = shared
        self.loss_tokens: int | None = None
        self.recording = False
        self.aux = torch.zeros(())
        self.tokens_per_expert = torch.zeros(model.experts, dtype=torch.int64)
        self.statistics = torch.zeros(model.experts + 2, dtype=torch.float64)

    def count_loss_tokens(self, tokens: int) -> None:
        """``N``, the step's loss tokens, which weigh each document's balance loss by ``n_d/N``
        (None: the micro-batch's own)."""
        self.loss_tokens = tokens

    def forward(self, x: torch.Tensor, real: torch.Tensor, documents: torch.Tensor, document_count: int
                ) -> torch.Tensor:
        """The mixture's output for ``x: [t, H]``; ``real`` marks the rows that are not padding,
        ``documents`` their document ids."""
        tokens = real.nonzero().squeeze(-1)
        inputs = x[tokens]
        routing = route(F.linear(inputs, self.router.weight), self.model.top_k, self.model.normalise_top_k)
        outputs = expert_outputs(inputs, routing, list(self.experts.values()), self.model.experts, self.expert_group)
        routed = torch.zeros_like(x).index_copy(0, tokens, outputs)
        weighted, counted = document_balance(routing, documents[tokens], document_count, self.model.experts,
                                             self.token_groups)
        self.aux = (weighted / counted.clamp(min=1)).detach()
        self.tokens_per_expert = tokens_per_expert(routing.experts, self.model.experts)
        if self.recording:
            self.statistics += torch.cat((self.tokens_per_expert.double().cpu(),
                                          torch.stack((weighted.detach(), counted)).double().cpu()))
        if self.shared is not None:
            routed = routed + self.shared(x)
        if not weighted.requires_grad:
            return routed
        scale = self.model.aux_loss_coef / (self.model.layers * (self.loss_tokens or int(counted.item()) or 1))
        return _AuxLoss.apply(routed, weighted, scale)


def step_statistics(mixtures: Sequence[MixtureOfExperts], experts: int, counts_tokens: bool, counts_aux: bool
                    ) -> torch.Tensor:
    """What ``mixtures`` recorded since the last call, as ``[c_0 … c_{E−1}, Σ n·aux, Σ n]`` (fp64),
    then cleared: routed copies per expert (when ``counts_tokens``: this rank's tokens are its own,
    not a tp replica's) and the documents' balance loss weighted by their tokens (when
    ``counts_aux``: the rank leads its token groups, whose ranks all hold the same value). Summed
    over the ranks, ``Σ n·aux / Σ n`` is the step's balance loss, a token-weighted mean over the
    layers' documents."""
    total = torch.zeros(experts + 2, dtype=torch.float64)
    for moe in mixtures:
        total[:experts] += moe.statistics[:experts] if counts_tokens else 0.0
        total[experts:] += moe.statistics[experts:] if counts_aux else 0.0
        moe.statistics.zero_()
    return total
