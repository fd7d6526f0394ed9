"""HydraulisCPScheduler against the real Megatron-Core BalancedCPScheduler (the ``megatron`` extra)."""

import warnings

import pytest

from hydraulis.integrations.cp_contract import check_cp_groups
from hydraulis.integrations.megatron import HydraulisCPScheduler
from tests.integrations.helpers import cp_space, long_tailed

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    schedule = pytest.importorskip("megatron.core.pipeline_parallel.hybrid_cp_schedule",
                                   reason="megatron-core is not installed (pip install -e '.[megatron]')")


class Group:
    """Stands in for the DP×CP process group: both schedulers only ask its size."""

    def __init__(self, size: int) -> None:
        self._size = size

    def size(self) -> int:
        return self._size


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ranks", [8, 32])
def test_same_inputs_both_outputs_pass_the_consumers_checks(ranks, seed):
    per_rank = 8_192
    ours = HydraulisCPScheduler(per_rank, Group(ranks), space=cp_space(ranks), tp=8)
    theirs = schedule.BalancedCPScheduler(max_seq_len_per_rank=per_rank, dp_cp_group=Group(ranks))
    lengths = long_tailed(ranks * 10, 8 * per_rank, seed)
    sample_id_seqlens = [(100 + i, int(s)) for i, s in enumerate(lengths)]
    table = dict(sample_id_seqlens)
    for scheduler, room in ((theirs, None), (ours, ours.ranks)):
        groups, sample_id_groups = scheduler.get_groups_and_subsamples(list(sample_id_seqlens), None)
        assert all(isinstance(g, list) and len(g) == ranks for g in sample_id_groups)
        check_cp_groups(groups, sample_id_groups, table, ranks, room)


def test_reads_the_space_from_a_path(tmp_path):
    from hydraulis.artifacts.scheme_space import write_scheme_space

    path = tmp_path / "space.json"
    write_scheme_space(path, cp_space(8))
    scheduler = HydraulisCPScheduler(8_192, Group(8), space=str(path), tp=8)
    groups, ids = scheduler.get_groups_and_subsamples([(0, 9_000), (1, 100), (2, 200), (3, 300)] * 1, None)
    check_cp_groups(groups, ids, {0: 9_000, 1: 100, 2: 200, 3: 300}, 8, scheduler.ranks)
