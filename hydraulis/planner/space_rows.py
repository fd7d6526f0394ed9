"""A scheme space as rows: what ``space show`` prints and the service returns."""

from __future__ import annotations

from hydraulis.base.stages import even_split
from hydraulis.base.types import OptimizerLayout, Recompute, Scheme, SchemeProfile, SchemeSpace
from hydraulis.cost import memory_breakdown
from hydraulis.planner.config import Variants
from hydraulis.planner.variants import Work, choose_variant, plain_space


def space_rows(space: SchemeSpace, layout: OptimizerLayout, variants: Variants = Variants.ALL,
               longest: int | None = None) -> list[dict]:
    """One dict per scheme: ``cp, tp, pp``, its options as ``sp`` (bool), ``recompute``
    (``none``, ``selective`` or ``full``) and ``recompute_layers`` (layers recomputed in full
    per stage of the even split) and as text (``options``, e.g. ``["sp", "recompute=full"]``),
    ``devices, a, b, c, max_seq_len, limit``, the model-state bytes and activation bytes per
    token under ``layout``. A space with segments under ``variants`` all also shows, after each
    plain scheme, its variants recomputing the attention core or every layer, with and without
    sequence parallelism, and with ``longest`` the variant chosen to hold that many tokens
    (:func:`~hydraulis.planner.variants.choose_variant`, on one sequence of that length)."""
    space = plain_space(space, variants)
    layout.check(space.model, space.cluster.devices)
    rows = []
    for profile in space.profiles:
        rows.append(_row(space, profile, layout))
        if space.has_variants and not profile.scheme.options:
            shown = {profile.scheme}
            for scheme in _mode_variants(space, profile.scheme):
                rows.append(_row(space, space.profile(scheme), layout))
                shown.add(scheme)
            chosen = None if longest is None else choose_variant(space, layout, profile, longest, Work.sequence(longest))
            if chosen is not None and chosen.scheme not in shown:
                rows.append(_row(space, chosen.profile, layout))
    return rows


def _mode_variants(space: SchemeSpace, plain: Scheme) -> list[Scheme]:
    """sp, then selective and full recomputation without and with sp (where segments exist)."""
    sps = [sp for sp in (False, True) if space.segments_of(plain.cp, plain.tp, sp) is not None]
    return ([Scheme(plain.cp, plain.tp, plain.pp, True)] if True in sps else []) + [
        Scheme(plain.cp, plain.tp, plain.pp, sp, mode) for mode in (Recompute.SELECTIVE, Recompute.FULL) for sp in sps]


def _row(space: SchemeSpace, profile: SchemeProfile, layout: OptimizerLayout) -> dict:
    scheme = profile.scheme
    memory = memory_breakdown(space.memory, space.model, profile, layout, space.cluster.devices)
    split = even_split(space.model.layers, scheme.pp)
    return {
        "cp": scheme.cp, "tp": scheme.tp, "pp": scheme.pp,
        "sp": scheme.sp, "recompute": scheme.recompute.value,
        "recompute_layers": [scheme.full_layers(stage, layers) for stage, layers in enumerate(split)],
        "options": list(scheme.options),
        "devices": scheme.devices,
        "a": profile.time.a, "b": profile.time.b, "c": profile.time.c,
        "max_seq_len": memory.max_seq_len, "limit": memory.limit.value,
        "states_bytes": memory.states,
        "activation_bytes_per_token": profile.activation_bytes_per_token,
    }
