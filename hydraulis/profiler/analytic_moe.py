"""The analytic time of a mixture of experts' routed part, per token of a micro-batch, forward +
backward (design §6.1; :mod:`.analytic` adds it to the decoder layer's dense terms, whose
``6·P_l`` counts attention, router and shared experts only).

``E`` experts of width ``F``, ``k`` per token, ``ρ`` the routing imbalance, ``s_m`` the ranks
that split a stage's tokens for the routed experts (:func:`routed_layer_time`). Per token:

* the routed experts' work, 6 FLOPs per parameter per token for ``k`` experts of ``3·H·F``::

      b_exp = ρ·6·k·3·H·F / (s_m·R·η_m)

* dispatch and combine, forward and backward: four all-to-alls of the token's ``k`` copies of
  ``b·H`` bytes, a share ``(ep − 1)/ep`` leaving the rank, over NVLink when the ``ep`` ranks lie in
  one node, else over the network (MegaScale-MoE, Jin et al. 2025, §3)::

      b_a2a = ρ·4·k·b·H·(ep − 1)/ep / (s_m·β_ep),      c_a2a = 4·λ·[ep > 1]

Full recomputation runs the forward again: ``6 → 8`` FLOPs per parameter and ``4 → 6`` all-to-alls.
Worked example, Mixtral-8x7B (``H = 4096``, ``F = 14336``, ``k = 2``) on H100 (``R·η_m`` = 494.5
TFLOP/s), scheme ``(1,8,1)[sp,ep=8]``, ``ρ = 1.25``, bf16: ``b_exp = 1.25·6·2·176.2M/(8·494.5e9)
≈ 6.7e-4`` ms and ``b_a2a = 1.25·4·2·2·4096·(7/8)/(8·450e6) ≈ 2.0e-5`` ms per token and layer.
"""

from __future__ import annotations

from hydraulis.base.types import Cluster, DeviceSpec, ModelSpec, Recompute, TimeCoefficients


def routed_layer_time(model: ModelSpec, device: DeviceSpec, cluster: Cluster, cp: int, tp: int, sp: bool, ep: int,
                      recompute: Recompute, dtype_bytes: int) -> TimeCoefficients:
    """``(0, b_exp + b_a2a, c_a2a)`` of the module docstring (zero for a dense model).

    Notation as :mod:`.analytic` (``R``, ``η_m``, ``λ``), plus ``E`` experts of width ``F``, ``k``
    experts per token, ``ρ`` the routing imbalance (the most loaded expert-parallel rank's routed
    tokens over the mean, ``model.routing_imbalance``; 1 without expert parallelism, where every
    rank runs every expert on its own tokens), ``b`` the activations' bytes and ``s_m`` the ranks
    that split a stage's tokens for the routed experts: ``cp·tp`` under sequence parallelism
    (which expert parallelism needs), else ``cp`` (the tp ranks repeat the mixture).
    """
    if not model.is_moe:
        return TimeCoefficients(0.0, 0.0, 0.0)
    full = recompute is Recompute.FULL
    imbalance = model.routing_imbalance if ep > 1 else 1.0
    shards = cp * (tp if sp else 1)
    rate_ms = device.peak_tflops * 1e12 / 1e3 * device.matmul_efficiency
    work = (8.0 if full else 6.0) * model.top_k * model.expert_params / (shards * rate_ms)
    inside = ep <= cluster.devices_per_node
    bandwidth = (device.intra_node_gbps if inside else device.inter_node_gbps) * 1e6
    exchanges = (6.0 if full else 4.0) if ep > 1 else 0.0
    moved = exchanges * model.top_k * dtype_bytes * model.hidden * (ep - 1) / ep / (shards * bandwidth)
    latency = exchanges * device.collective_latency_us / 1e3
    return TimeCoefficients(0.0, imbalance * (work + moved), latency)
