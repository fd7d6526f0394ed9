"""The optimizer layout: one homogeneous ``(dp, tp, pp)`` for fp32 master weights and Adam moments.

Every strategy of a proposal reduces its gradients into this one layout (design §2, §9), so
it is chosen once, for memory. Per device it stores (cost/memory.py)

    optimizer states = α·(⌈L/pp_o⌉·B_layer + n(pp_o)·B_emb) / (tp_o·dp_o)

and with ``dp_o·tp_o·pp_o = N`` the denominator is ``N/pp_o``, so the states are
``α·(⌈L/pp_o⌉·pp_o·B_layer + n(pp_o)·pp_o·B_emb)/N ≥ α·(L·B_layer + 2·B_emb)/N``, with equality
for ``pp_o = 1``: every layout sharding over all ``N`` devices without pipeline stages leaves
the same, largest, memory to activations; ``tp_o`` only regroups the same shards. The rule:

1. consider every ``(dp, tp, pp)`` with ``dp·tp·pp = N`` that shards the model;
2. keep those that let some scheme hold ``S`` (the maximum length);
3. take the one whose schemes hold the most, ``Σ_k min(S_k, S)``;
4. break ties by the fewest model-parallel degrees ``tp·pp`` (plain ZeRO-1), then smaller tp.

In a space with variants (:mod:`hydraulis.planner.variants`) a scheme holds, in steps 2 and 3,
what its most frugal variant holds (:func:`~hydraulis.planner.variants.frugal_space`): the
planner may pick it for the longest sequences, so a layout under which only recomputation
holds ``S`` is a layout the proposal can use.

Worked example: LLaMA-7B original pool, N = 32: dp32·tp1·pp1 and dp8·tp4·pp1 tie in step 3
((1,8,1) holds 85,358 tokens under both), dp32·tp1·pp1 wins step 4.
"""

from __future__ import annotations

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import LOSS_CHUNK_TOKENS, OptimizerLayout, Scheme, SchemeSpace
from hydraulis.cost import SchemeCapacity, scheme_capacities
from hydraulis.planner.variants import frugal_space


def choose_optimizer_layout(space: SchemeSpace, max_seq_len: int, given: OptimizerLayout | None = None,
                            loss_chunk: int = LOSS_CHUNK_TOKENS) -> tuple[OptimizerLayout, str]:
    """The layout of the module docstring (or ``given``, checked) and why, in one sentence; memory
    with the runtime's loss in chunks of ``loss_chunk`` tokens."""
    devices = space.cluster.devices
    if given is not None:
        given.check(space.model, devices)
        return given, f"optimizer layout {given} as given ({_states_note(space, given)})"
    candidates = []
    frugal = frugal_space(space)
    for layout in _layouts(space):
        capacities = scheme_capacities(frugal, layout, loss_chunk)
        longest = max(c.max_seq_len for c in capacities)
        if longest >= max_seq_len:
            held = sum(min(c.max_seq_len, max_seq_len) for c in capacities)
            candidates.append(((-held, layout.tp * layout.pp, layout.tp), layout, capacities))
    if not candidates:
        best = max(scheme_capacities(frugal, OptimizerLayout(devices, 1, 1), loss_chunk), key=lambda c: c.max_seq_len)
        raise HydraulisError("max_seq_len", max_seq_len,
                             f"exceeds the longest sequence any scheme can hold on {devices} devices "
                             f"({best.max_seq_len} tokens, scheme {best.profile.scheme}, optimizer layout "
                             f"dp{devices}·tp1·pp1)")
    candidates.sort(key=lambda c: c[0])
    _, layout, capacities = candidates[0]
    holder = _best_holder(capacities, max_seq_len)
    return layout, (f"optimizer layout {layout}: of {len(candidates)} layouts over all {devices} devices that "
                    f"let a scheme hold {max_seq_len} tokens it leaves the most memory to activations "
                    f"({_states_note(space, layout)}; e.g. {holder.profile.scheme} holds {holder.max_seq_len} "
                    f"tokens) with the fewest model-parallel degrees")


def _layouts(space: SchemeSpace) -> list[OptimizerLayout]:
    devices, model = space.cluster.devices, space.model
    layouts = []
    for tp in _divisors(devices):
        for pp in _divisors(devices // tp):
            try:
                model.check_scheme(Scheme(1, tp, pp))
            except HydraulisError:
                continue
            layouts.append(OptimizerLayout(devices // (tp * pp), tp, pp))
    return layouts


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _best_holder(capacities: tuple[SchemeCapacity, ...], max_seq_len: int) -> SchemeCapacity:
    holders = [c for c in capacities if c.max_seq_len >= max_seq_len]
    return min(holders, key=lambda c: (c.profile.scheme.devices, -c.max_seq_len))


def _states_note(space: SchemeSpace, layout: OptimizerLayout) -> str:
    share = space.memory.sharded_state_fraction
    return f"{share:.0%} of model-state bytes sharded {layout.dp * layout.tp}-way per stage"
