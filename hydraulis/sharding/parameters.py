"""The model's parameters and how a compute layout shards them.

Every parameter has one canonical, full-size form (the optimizer's view, the checkpoint's, the
single-device model's) and, on each rank of a pipeline, a **shard**: the parameters of the
rank's stage, sliced along one dimension for tensor parallelism. Context parallelism and the
pipelines replicate shards.

Tensor-parallel rule for a dimension of ``U`` units (heads of ``head_dim`` rows, or single rows of
the MLP and the vocabulary), ``tp`` ranks, rank ``r`` (``tp`` the stage's own degree,
:meth:`~hydraulis.base.scheme.Scheme.stage_tp`: stages of a staged scheme, design §9.2, may differ)::

    first unit = ⌊r·U/tp⌋,   units held = max(U/tp, 1)

The details: :func:`parameter_specs`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from hydraulis.base.types import ModelSpec, Scheme
from hydraulis.sharding.pipeline import PipelineSplit


class Holder(str, Enum):
    """Which stage holds a parameter."""

    EMBEDDING = "embedding"
    """The first stage."""
    LAYER = "layer"
    """The stage holding its decoder layer."""
    OUTPUT = "output"
    """The last stage (final norm and output head)."""


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter in canonical form. ``tp_dim`` is the dimension tensor parallelism splits
    (None: held whole on every tp rank), made of units of ``unit`` rows each."""

    name: str
    shape: tuple[int, ...]
    holder: Holder
    layer: int | None = None
    tp_dim: int | None = None
    unit: int = 1
    partial: bool = False
    expert: int | None = None
    experts: int = 0

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    @property
    def units(self) -> int:
        return self.shape[self.tp_dim] // self.unit if self.tp_dim is not None else 1


@dataclass(frozen=True)
class Shard:
    """The part of ``spec`` a rank holds: ``length`` elements of dimension ``dim`` from ``start``
    (``dim`` None: the whole tensor); ``contributes`` says whether its gradient is summed."""

    spec: ParameterSpec
    dim: int | None
    start: int
    length: int
    contributes: bool

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def shape(self) -> tuple[int, ...]:
        if self.dim is None:
            return self.spec.shape
        return tuple(self.length if d == self.dim else n for d, n in enumerate(self.spec.shape))

    def of(self, full):
        """This shard's view of the full tensor ``full`` (writable)."""
        return full if self.dim is None else full.narrow(self.dim, self.start, self.length)


def unit_range(units: int, size: int, rank: int) -> tuple[int, int]:
    """``(first unit, units held)`` of tp rank ``rank`` among ``size`` (:func:`parameter_specs`)."""
    return rank * units // size, max(units // size, 1)


@lru_cache(maxsize=16)
def parameter_specs(model: ModelSpec) -> tuple[ParameterSpec, ...]:
    """All parameters in canonical order: embedding, layers 0…L−1, final norm, head.

    When ``tp`` divides ``U`` the ranks hold disjoint blocks; when ``U`` divides ``tp`` (grouped-query
    attention with fewer kv heads than tp ranks) ``tp/U`` consecutive ranks hold the same kv head.
    Worked example, ``kv_heads = 2``, ``tp = 4``: ranks 0, 1 hold kv head 0, ranks 2, 3 kv head 1 —
    and rank ``r``'s query heads ``r·H_q/4 …`` all map to exactly that kv head.

    Gradient contributions. The gradient of a parameter is the sum of its shards' gradients over
    all pipelines, with one exception: a parameter that every tp rank holds whole and computes from
    the same replicated activations (the RMSNorm weights) has the *same* gradient on every tp rank,
    so only tp rank 0 contributes it (:attr:`Shard.contributes`) — unless the pipeline runs sequence
    parallelism (:mod:`hydraulis.runtime.parallel.sequence`): each tp rank then normalises its own
    tokens and every tp rank contributes its partial gradient. Replicated kv heads receive
    different partial gradients (from different query heads) and all contribute. So do parameters
    marked ``partial``: Qwen3's q/k norms (each tp rank normalises its own heads). A mixture of
    experts' router and routed experts are held whole and follow the norms' rule: without sp every
    tp rank runs the same mixture on the same tokens, under sp each its own share. A routed expert's
    parameters name their expert (``expert`` of ``experts``); under expert parallelism ``ep``
    (folded over the tp ranks, :class:`~hydraulis.base.scheme.Scheme`) tp rank ``t`` holds experts
    ``e·E/ep … (e+1)·E/ep − 1`` whole, ``e = t mod ep`` (:func:`held`).
    """
    h, hd, v = model.hidden, model.head_dim, model.vocab
    specs = [ParameterSpec("embed.weight", (v, h), Holder.EMBEDDING, tp_dim=0)]
    for i in range(model.layers):
        prefix = f"layers.{i}."
        specs += [
            ParameterSpec(prefix + "attn_norm.weight", (h,), Holder.LAYER, i),
            ParameterSpec(prefix + "attn.wq.weight", (model.heads * hd, h), Holder.LAYER, i, 0, hd),
            ParameterSpec(prefix + "attn.wk.weight", (model.kv_dim, h), Holder.LAYER, i, 0, hd),
            ParameterSpec(prefix + "attn.wv.weight", (model.kv_dim, h), Holder.LAYER, i, 0, hd),
            ParameterSpec(prefix + "attn.wo.weight", (h, model.heads * hd), Holder.LAYER, i, 1, hd),
        ]
        if model.qk_norm:
            specs += [ParameterSpec(prefix + f"attn.{n}_norm.weight", (hd,), Holder.LAYER, i, partial=True)
                      for n in ("q", "k")]
        specs.append(ParameterSpec(prefix + "mlp_norm.weight", (h,), Holder.LAYER, i))
        specs += _mlp_specs(model, i) if model.is_moe else _swiglu_specs(prefix + "mlp.", h, model.ffn_hidden, i)
    specs += [ParameterSpec("norm.weight", (h,), Holder.OUTPUT),
              ParameterSpec("head.weight", (v, h), Holder.OUTPUT, tp_dim=0)]
    return tuple(specs)


def _swiglu_specs(prefix: str, hidden: int, width: int, layer: int, **marks) -> list[ParameterSpec]:
    """A SwiGLU MLP's gate, up and down matrices; tensor-parallel unless ``marks`` name a routed
    expert (``expert``: held whole)."""
    dims = (None, None) if marks else (0, 1)
    return [ParameterSpec(prefix + "gate.weight", (width, hidden), Holder.LAYER, layer, dims[0], **marks),
            ParameterSpec(prefix + "up.weight", (width, hidden), Holder.LAYER, layer, dims[0], **marks),
            ParameterSpec(prefix + "down.weight", (hidden, width), Holder.LAYER, layer, dims[1], **marks)]


def _mlp_specs(model: ModelSpec, layer: int) -> list[ParameterSpec]:
    """A mixture of experts' router ``E × H``, its shared experts as one tensor-parallel SwiGLU of
    width ``n_s·F`` and each routed expert's SwiGLU of width ``F``."""
    prefix = f"layers.{layer}.moe."
    specs = [ParameterSpec(prefix + "router.weight", (model.experts, model.hidden), Holder.LAYER, layer)]
    if model.shared_experts:
        specs += _swiglu_specs(prefix + "shared.", model.hidden, model.shared_experts * model.ffn_hidden, layer)
    for expert in range(model.experts):
        specs += _swiglu_specs(f"{prefix}experts.{expert}.", model.hidden, model.ffn_hidden, layer, expert=expert,
                               experts=model.experts)
    return specs


def held(spec: ParameterSpec, scheme: Scheme, tp_rank: int) -> bool:
    """Whether tp rank ``tp_rank`` of a pipeline of ``scheme`` holds ``spec`` if its stage does:
    a routed expert only on its expert-parallel rank (:func:`parameter_specs`), anything else always."""
    return spec.expert is None or spec.expert // (spec.experts // scheme.ep) == tp_rank % scheme.ep


def stage_shards(model: ModelSpec, layout: PipelineSplit, stage: int, tp_rank: int) -> tuple[Shard, ...]:
    """The shards held by tp rank ``tp_rank`` of ``stage`` of a pipeline laid out as ``layout``."""
    return tuple(shard_of(spec, layout.scheme, stage, tp_rank) for spec in parameter_specs(model)
                 if holding_stage(spec, layout) == stage and held(spec, layout.scheme, tp_rank))


def shard_of(spec: ParameterSpec, scheme: Scheme, stage: int, tp_rank: int) -> Shard:
    """The shard of ``spec`` that tp rank ``tp_rank`` of ``stage`` of a pipeline of ``scheme`` holds."""
    if spec.tp_dim is None:
        return Shard(spec, None, 0, spec.shape[0], contributes=tp_rank == 0 or scheme.sp or spec.partial)
    first, count = unit_range(spec.units, scheme.stage_tp(stage), tp_rank)
    return Shard(spec, spec.tp_dim, first * spec.unit, count * spec.unit, contributes=True)


def holding_stage(spec: ParameterSpec, layout: PipelineSplit) -> int:
    """The stage of a pipeline laid out as ``layout`` that holds ``spec``."""
    if spec.holder is Holder.EMBEDDING:
        return 0
    if spec.holder is Holder.OUTPUT:
        return layout.scheme.pp - 1
    return next(stage for stage in range(layout.scheme.pp) if spec.layer in layout.stage_range(stage))
