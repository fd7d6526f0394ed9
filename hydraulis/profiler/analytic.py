"""An analytic scheme space: plan for hardware you do not have.

Every coefficient follows from the model shape and the device's figures (``presets.json``).
Notation: ``H`` hidden, ``F`` MLP hidden, ``V`` vocabulary, ``kv`` key/value width,
``P_l`` parameters per layer, ``L_s = ⌈L/pp⌉`` layers per stage, ``R`` peak FLOP/s,
``η_m``/``η_a`` achievable fractions for matmuls/attention, ``β_tp``, ``β_cp``, ``β_pp`` link
bandwidths (NVLink inside a node, the network when a group spans nodes), ``λ`` collective
latency, ``o`` the fixed time per layer per micro-batch. Per stage, forward + backward:

* dense work, 6 FLOPs per parameter per token (forward 2, backward 4), the output head
  counted on every stage (the last stage is the slowest and sets the 1F1B pace)::

      b_flop = 6·(L_s·P_l + H·V) / (tp·cp·R·η_m)

* causal attention, ``2·H·s²`` FLOPs forward per layer, ×3.5 with the backward's recompute
  (FlashAttention-2, Dao 2023)::

      a = 7·H·L_s / (tp·cp·R·η_a)

* tensor parallelism with sequence parallelism: per layer two all-gathers and two
  reduce-scatters of ``2H`` bytes per token forward, as many backward, each moving a share
  ``(tp−1)/tp`` (Korthikanti et al. 2022)::

      b_tp = L_s·16·H·(tp−1)/tp / (cp·β_tp)

* context parallelism as a ring passing K and V (forward) and K, V, dK, dV (backward)::

      b_cp = L_s·12·kv·(cp−1)/cp / (tp·β_cp)

* pipeline hand-offs of ``2H`` bytes per token each way, sharded over tp and cp::

      b_pp = 4·H / (tp·cp·β_pp)            (pp > 1)

* fixed cost per micro-batch: ``c = L_s·(o + λ·(8·[tp>1] + 3·(cp−1))) + 2·λ·[pp>1]``.

Recomputation (:class:`~hydraulis.types.Recompute`) runs forward work again in the backward:
``selective`` the attention core (``a``: 7 → 9); ``full`` every layer's forward — its 2 of the 6
dense FLOPs per parameter (the head's are not recomputed: ``6·L_s·P_l → 8·L_s·P_l``), the
attention (``a``: 7 → 9) and the forward half of the layer's tp and cp traffic and collectives
(×3/2 and ×4/3). Sequence parallelism changes no time term: its all-gathers and reduce-scatters
are the ones assumed above.

Memory is the runtime's own accounting (:mod:`hydraulis.runtime.memory`), at the precision the
runtime picks on the device (bf16 on an accelerator, fp32 on the ``cpu`` preset): model states
of ``w + g`` bytes per parameter in the compute layout (weights and their gradients, 4 under
bf16) and 16 in the optimizer layout (fp32 master, reduced gradient and Adam moments), so
``α = 16/20``; activations of the most loaded stage ``σ`` (1F1B keeps ``pp − σ`` micro-batches
in flight, the last stage holds the loss's logits), with what the runtime really keeps per
layer and per option — no sequence parallelism, recomputation or ring attention assumed where
the scheme does not run them::

      m_tok = max_σ ((pp − σ)·kept(σ) + transient(σ)) / cp

Worked example, LLaMA-7B on A800 (R = 312 TFLOP/s, η_m = 0.7), scheme (1,1,2):
``b_flop = 6·(16·202.4M + 131M)/(218.4 T) ≈ 0.0925`` ms per token; the pipeline hand-off over
NVLink adds ``4·4096 B / 200 GB/s ≈ 0.0001`` ms, so ``b ≈ 0.0926``; the measured pool says 0.0946.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

from hydraulis.errors import HydraulisError, require
from hydraulis.runtime.config import OptimizerKind
from hydraulis.runtime.layout import even_split
from hydraulis.runtime.memory.activations import stage_bytes_per_token
from hydraulis.runtime.memory.states import DTYPE_BYTES, device_precision, state_bytes
from hydraulis.types import (
    Cluster,
    DeviceSpec,
    MemoryModel,
    ModelSpec,
    PipelineModel,
    Provenance,
    Recompute,
    Scheme,
    SchemeOptions,
    SchemeProfile,
    SchemeSpace,
    SpaceSource,
    TimeCoefficients,
)



def analytic_scheme_space(
    model: ModelSpec,
    device: DeviceSpec,
    cluster: Cluster,
    cps: Iterable[int],
    tps: Iterable[int],
    pps: Iterable[int],
    created: str,
    tool_version: str,
    command: str = "",
    variants: Iterable[SchemeOptions] = (SchemeOptions(),),
) -> SchemeSpace:
    """Every ``(cp, tp, pp)`` from the given degrees that shards ``model`` and fits the cluster,
    under each of ``variants`` (an ``sp`` variant where ``tp > 1``)."""
    schemes = [
        variant.scheme(cp, tp, pp)
        for cp, tp, pp in itertools.product(sorted(set(cps)), sorted(set(tps)), sorted(set(pps)))
        if cp * tp * pp <= cluster.devices and _shards(model, Scheme(cp, tp, pp))
        for variant in dict.fromkeys(variants) if tp > 1 or not variant.sp
    ]
    require(bool(schemes), "schemes", [], f"none of the degrees shards {model.name} on {cluster.devices} devices")
    multi_node = cluster.devices > cluster.devices_per_node
    return SchemeSpace(
        model=model,
        cluster=cluster,
        memory=analytic_memory_model(model, device),
        profiles=tuple(analytic_profile(model, device, cluster, s) for s in schemes),
        provenance=Provenance(SpaceSource.ANALYTIC, device.name, created, tool_version, command),
        pipeline_model=PipelineModel(p2p_ms=device.collective_latency_us / 1e3),
        reduce_gbps=device.inter_node_gbps if multi_node else device.intra_node_gbps,
        communicator_ms=device.communicator_ms,
    )


def analytic_memory_model(model: ModelSpec, device: DeviceSpec, device_memory_bytes: int | None = None) -> MemoryModel:
    """Model-state memory per :func:`~hydraulis.runtime.memory.states.state_bytes` at the
    device's precision under Adam; the device's memory (or ``device_memory_bytes`` when
    measured) and safety margin."""
    state = state_bytes(device_precision(device.name), OptimizerKind.ADAM)
    return MemoryModel(
        device_memory_bytes=device.memory_bytes if device_memory_bytes is None else device_memory_bytes,
        safety_margin_bytes=device.safety_margin_bytes,
        layer_state_bytes=float(state.total * model.params_per_layer),
        embedding_state_bytes=float(state.total * model.embedding_params),
        sharded_state_fraction=state.optimizer / state.total,
    )


def analytic_profile(model: ModelSpec, device: DeviceSpec, cluster: Cluster, scheme: Scheme) -> SchemeProfile:
    """The formulas of the module docstring for one scheme."""
    cp, tp, pp = scheme.cp, scheme.tp, scheme.pp
    h, kv, v = model.hidden, model.kv_dim, model.vocab
    stage_layers = math.ceil(model.layers / pp)
    rate_ms = device.peak_tflops * 1e12 / 1e3
    per_node = cluster.devices_per_node
    beta_tp = _bytes_per_ms(device, tp <= per_node)
    beta_cp = _bytes_per_ms(device, tp * cp <= per_node)
    beta_pp = _bytes_per_ms(device, scheme.devices <= per_node)
    full = scheme.recompute is Recompute.FULL
    layer_flops = 8.0 if full else 6.0
    b = (layer_flops * stage_layers * model.params_per_layer + 6.0 * h * v) / (
        tp * cp * rate_ms * device.matmul_efficiency)
    b += stage_layers * (24.0 if full else 16.0) * h * (tp - 1) / tp / (cp * beta_tp)
    b += stage_layers * (16.0 if full else 12.0) * kv * (cp - 1) / cp / (tp * beta_cp)
    if pp > 1:
        b += 4.0 * h / (tp * cp * beta_pp)
    attention_flops = 7.0 if scheme.recompute is Recompute.NONE else 9.0
    a = attention_flops * h * stage_layers / (tp * cp * rate_ms * device.attention_efficiency)
    latency_ms = device.collective_latency_us / 1e3
    collectives = (12 if full else 8) * (tp > 1) + (4 if full else 3) * (cp - 1)
    c = stage_layers * (device.layer_overhead_us / 1e3 + latency_ms * collectives) + 2 * latency_ms * (pp > 1)
    dtype_bytes = DTYPE_BYTES[device_precision(device.name)]
    split = even_split(model.layers, pp)
    activations = max(stage_bytes_per_token(model, scheme, (scheme.recompute,) * layers, stage, dtype_bytes)
                      for stage, layers in enumerate(split))
    return SchemeProfile(
        scheme=scheme,
        time=TimeCoefficients(a=a, b=b, c=c),
        activation_bytes_per_token=activations,
        overhead_bytes=device.runtime_overhead_bytes,
    )


def _bytes_per_ms(device: DeviceSpec, inside_node: bool) -> float:
    return (device.intra_node_gbps if inside_node else device.inter_node_gbps) * 1e6


def _shards(model: ModelSpec, scheme: Scheme) -> bool:
    try:
        model.check_scheme(scheme)
    except HydraulisError:
        return False
    return True
