"""The structure Megatron-Core's hybrid context-parallel consumer relies on (docs/integrations.md).

``hybrid_context_parallel_forward_backward`` runs, per group ``g`` and rank ``r``, the samples
``sample_id_groups[g][r]`` one forward/backward each, with context-parallel size = the number of
ranks of the group listing the sample, over ``get_hybrid_data_context_parallel_groups(k)`` —
the aligned block of ``k`` consecutive ranks holding ``r`` — and a barrier after each group. So:

1. every group lists every rank, and ``groups[g][r]`` has one length per sample of
   ``sample_id_groups[g][r]``, equal to the sample's;
2. every sample runs in exactly one group;
3. a sample's ranks in its group are ``k`` consecutive ranks, ``k`` a power of two, starting at a
   multiple of ``k`` (and ``k`` must not exceed the sample's room: :class:`CPRanks`);
4. those ``k`` ranks list the same samples in the same order (each forward is a collective);
5. every rank runs a sample in the last group (the schedule runs ``[-1]`` there).

Example: ranks 0–1 ``[[7], [7]]`` and ranks 2, 3 ``[3, 5]``, ``[4]`` pass; ``[[7], [3], [7], [4]]``
fails 3 (ranks 0 and 2 are not a block).
"""

from __future__ import annotations

from collections.abc import Sequence

from hydraulis.base.errors import HydraulisError, require
from hydraulis.integrations.cp_groups import CPGroups
from hydraulis.integrations.cp_ranks import CPRanks


def check_cp_groups(groups: Sequence[Sequence[Sequence[int]]], sample_id_groups: Sequence[Sequence[Sequence[int]]],
                    lengths: dict[int, int], ranks: int, room: CPRanks | None = None) -> CPGroups:
    """The plan as :class:`CPGroups` when it meets rules 1–5 of the module docstring (and every
    sample fits its ``k`` under ``room``); otherwise ``ValueError`` naming the rule's field."""
    require(len(groups) == len(sample_id_groups) and len(groups) > 0, "groups", len(groups),
            f"must be as many as the {len(sample_id_groups)} sample_id_groups, at least one")
    plan = CPGroups(tuple(tuple(tuple(int(i) for i in rank) for rank in g) for g in sample_id_groups))
    require(plan.ranks == ranks, "sample_id_groups[0]", plan.ranks, f"must list the {ranks} ranks")
    seen: set[int] = set()
    for g in range(len(plan.groups)):
        for r, (ids, seqlens) in enumerate(zip(plan.groups[g], groups[g])):
            require([lengths[i] for i in ids] == list(seqlens), f"groups[{g}][{r}]", list(seqlens),
                    f"must be the lengths of samples {list(ids)}")
        for i, members in plan.holders(g).items():
            _check_block(plan, g, i, members, lengths[i], room)
            require(i not in seen, "sample_id_groups", i, "runs in two groups")
            seen.add(i)
    require(seen == set(lengths), "sample_id_groups", sorted(set(lengths) - seen), "are samples that never run")
    idle = [r for r, ids in enumerate(plan.groups[-1]) if not ids]
    require(not idle, "sample_id_groups[-1]", idle, "are ranks without a sample in the last group")
    return plan


def _check_block(plan: CPGroups, g: int, sample: int, members: list[int], length: int, room: CPRanks | None) -> None:
    k, first = len(members), members[0]
    field = f"sample_id_groups[{g}] sample {sample}"
    require(k & (k - 1) == 0, field, members, "must run on a power-of-two number of ranks")
    require(members == list(range(first, first + k)) and first % k == 0, field, members,
            f"must run on {k} consecutive ranks starting at a multiple of {k}")
    require(all(plan.groups[g][r] == plan.groups[g][first] for r in members), field, members,
            "must run on ranks that list the same samples in the same order")
    if room is not None:
        try:
            capacity = room.option(k).capacity
        except HydraulisError as error:
            raise HydraulisError(field, k, f"is not a context-parallel size of the space ({error.problem})") from None
        require(length <= capacity, field, length, f"exceeds {capacity} tokens, what {k} ranks hold")
