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

**Load-balancing loss** (Switch Transformer, Fedus et al. 2022, eq. 4–6; Hugging Face's
``load_balancing_loss_func`` per layer) on the ``n`` real tokens of the micro-batch::

    aux = E · Σ_i f_i · P_i,    f_i = (times expert i is among a token's k)/n,    P_i = Σ_t p_t,i / n

Its gradient enters through the layer's output (:class:`_AuxLoss`, as Megatron-Core's
auxiliary-loss scaler), weighted ``model.aux_loss_coef / L`` so the objective adds
``coef·mean_l aux_l``; each layer keeps its last ``aux`` and tokens per expert for the logs.
Worked example: E = 4, k = 2, 2 tokens routed to (0, 1) and (0, 2) with ``P = (.4, .3, .2, .1)``:
``f = (1, .5, .5, 0)``, ``aux = 4·(.4 + .15 + .1) = 2.6`` (perfect balance gives k = 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.types import ModelSpec


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


def load_balancing_loss(routing: Routing, count: int) -> torch.Tensor:
    """``E · Σ_i f_i·P_i`` of the module docstring (0 without tokens)."""
    tokens = routing.probabilities.shape[0]
    if tokens == 0:
        return routing.probabilities.sum()
    share = tokens_per_expert(routing.experts, count).to(routing.probabilities.dtype) / tokens
    return count * (share * routing.probabilities.mean(dim=0)).sum()


class _AuxLoss(torch.autograd.Function):
    """Identity on ``output``; in the backward ``aux`` receives the gradient ``scale``."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, torch.full((), ctx.scale, dtype=torch.float32, device=grad.device), None


def expert_outputs(x: torch.Tensor, routing: Routing, experts: nn.ModuleList) -> torch.Tensor:
    """``Σ_j w_j·E_{e_j}(x)`` for every row of ``x``: the routed copies sorted by expert, each
    expert's rows as one matrix product (grouped on CUDA), combined by index addition."""
    top_k = routing.experts.shape[1]
    order = torch.argsort(routing.experts.reshape(-1), stable=True)
    rows = order // top_k
    counts = tokens_per_expert(routing.experts, len(experts))
    copies = x[rows]
    if _grouped(x, experts):
        hidden = _grouped_swiglu(copies, counts, experts)
    else:
        hidden = torch.cat([_swiglu(part, expert) for part, expert in zip(copies.split(counts.tolist()), experts)])
    weighted = hidden * routing.weights.reshape(-1)[order].unsqueeze(-1)
    return torch.zeros_like(x).index_add_(0, rows, weighted.to(x.dtype))


def _swiglu(x: torch.Tensor, expert: Expert) -> torch.Tensor:
    return F.linear(F.silu(F.linear(x, expert.gate.weight)) * F.linear(x, expert.up.weight), expert.down.weight)


def _grouped(x: torch.Tensor, experts: nn.ModuleList) -> bool:
    """Whether torch's grouped GEMM runs here: CUDA, and rows of 16-byte multiples."""
    first = experts[0].gate.weight
    aligned = all(size * x.element_size() % 16 == 0 for size in first.shape)
    return x.is_cuda and hasattr(torch, "_grouped_mm") and aligned


def _grouped_swiglu(copies: torch.Tensor, counts: torch.Tensor, experts: nn.ModuleList) -> torch.Tensor:
    offsets = torch.cumsum(counts, 0).to(torch.int32)

    def stacked(name: str) -> torch.Tensor:
        return torch.stack([getattr(e, name).weight for e in experts]).transpose(1, 2)

    gate = torch._grouped_mm(copies, stacked("gate"), offs=offsets)
    up = torch._grouped_mm(copies, stacked("up"), offs=offsets)
    return torch._grouped_mm(F.silu(gate) * up, stacked("down"), offs=offsets)


class MixtureOfExperts(nn.Module):
    """A decoder layer's mixture of experts on one rank (module docstring). ``shared`` is the
    tensor-parallel SwiGLU of the shared experts (None without), built by the caller. The block
    runs on the tokens the rank holds between blocks: all of them with ``tp = 1``, the rank's share
    under sequence parallelism; other tensor-parallel layouts are not run yet."""

    def __init__(self, model: ModelSpec, tp: ParallelGroup, sequence_parallel: bool, shared: nn.Module | None,
                 **factory) -> None:
        super().__init__()
        if tp.size > 1 and not sequence_parallel:
            raise NotImplementedError("a mixture of experts with tp > 1 needs sequence parallelism (sp)")
        self.model, self.tp_rank = model, tp.rank
        self.router = Matrix(model.experts, model.hidden, **factory)
        self.experts = nn.ModuleList(Expert(model.hidden, model.ffn_hidden, **factory) for _ in range(model.experts))
        self.shared = shared
        self.aux_scale = model.aux_loss_coef / model.layers
        self.aux = torch.zeros(())
        self.tokens_per_expert = torch.zeros(model.experts, dtype=torch.int64)

    def forward(self, x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """The mixture's output for ``x: [t, H]``; ``real`` marks the rows that are not padding."""
        tokens = real.nonzero().squeeze(-1)
        inputs = x[tokens]
        routing = route(F.linear(inputs, self.router.weight), self.model.top_k, self.model.normalise_top_k)
        routed = torch.zeros_like(x).index_copy(0, tokens, expert_outputs(inputs, routing, self.experts))
        aux = load_balancing_loss(routing, self.model.experts)
        self.aux, self.tokens_per_expert = aux.detach(), tokens_per_expert(routing.experts, self.model.experts)
        if self.shared is not None:
            routed = routed + self.shared(x)
        return _AuxLoss.apply(routed, aux, self.aux_scale) if aux.requires_grad else routed
