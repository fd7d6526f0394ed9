"""HydraulisCPScheduler against the real Megatron-Core BalancedCPScheduler (the ``megatron`` extra)."""

import warnings

import numpy as np
import pytest

from hydraulis.integrations.cp_contract import check_cp_groups
from hydraulis.integrations.cp_groups import CPGroups, cp_step_ms
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


def _lognormal(count: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(7.5, 1.2, count).astype(np.int64) + 1, 65_536)
    return list(enumerate(lengths.tolist()))


@pytest.mark.parametrize("seed", range(6))
def test_never_worse_than_megatrons_plan_on_our_cost_model(seed):
    ours = HydraulisCPScheduler(8_192, Group(8), space=cp_space(8, cps=(1, 2, 4, 8)), tp=8)
    pairs = _lognormal(64, seed)
    lengths = [s for _, s in pairs]
    plans = [CPGroups(tuple(tuple(tuple(r) for r in g) for g in scheduler.get_groups_and_subsamples(pairs, None)[1]))
             for scheduler in (ours, schedule.BalancedCPScheduler(8_192, Group(8)))]
    mine, theirs = (cp_step_ms(p, lengths, ours.ranks) for p in plans)
    assert mine <= theirs


def test_replaces_balanced_cp_scheduler_by_assignment(monkeypatch):
    """Megatron's wrapper builds ``BalancedCPScheduler(max_seq_len_per_rank=..., dp_cp_group=...)``
    and later calls ``get_groups_and_subsamples(ids_and_lengths, config)``: no space, no tp."""
    import torch
    from megatron.core.datasets import data_schedule
    from megatron.core.transformer import TransformerConfig

    from hydraulis.integrations.megatron import install

    monkeypatch.setattr(schedule, "BalancedCPScheduler", schedule.BalancedCPScheduler)
    monkeypatch.setattr(data_schedule, "BalancedCPScheduler", data_schedule.BalancedCPScheduler)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA A800-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=None: type("P", (), {"total_memory": 85e9}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = TransformerConfig(num_layers=32, hidden_size=4096, num_attention_heads=32, ffn_hidden_size=11008,
                                   tensor_model_parallel_size=8, max_seqlen_per_dp_cp_rank=8_192,
                                   hybrid_context_parallel=True)
    schedule.BalancedCPScheduler = HydraulisCPScheduler
    scheduler = schedule.BalancedCPScheduler(max_seq_len_per_rank=config.max_seqlen_per_dp_cp_rank,
                                             dp_cp_group=Group(8))
    pairs = _lognormal(64, 0)
    groups, sample_id_groups = scheduler.get_groups_and_subsamples(pairs, config)
    check_cp_groups(groups, sample_id_groups, dict(pairs), 8, scheduler.ranks)
    assert scheduler.ranks.tp == 8 and [o.cp for o in scheduler.ranks.options] == [1, 2, 4, 8]
    install()
    assert data_schedule.BalancedCPScheduler is HydraulisCPScheduler is schedule.BalancedCPScheduler


def test_without_a_gpu_or_a_device_the_error_names_the_field():
    scheduler = HydraulisCPScheduler(8_192, Group(8), tp=8)
    with pytest.raises(ValueError, match="^(device|config)"):
        scheduler.get_groups_and_subsamples([(0, 100)] * 1, {"num_layers": 2, "hidden_size": 256,
                                                             "num_attention_heads": 4})


class _Fixed:
    """A stand-in for Megatron's scheduler answering one given plan of sample ids."""

    plan: list = []

    def __init__(self, max_seq_len_per_rank, dp_cp_group):
        self.size = dp_cp_group.size()

    def get_groups_and_subsamples(self, sample_id_seqlens, config):
        return [], self.plan


@pytest.mark.parametrize("seed", range(3))
def test_never_worse_keeps_megatrons_plan_when_it_is_cheaper(monkeypatch, seed):
    import hydraulis.integrations.megatron as adapter

    pairs = _lognormal(64, seed)
    lengths = [s for _, s in pairs]
    real = HydraulisCPScheduler(8_192, Group(8), space=cp_space(8, cps=(1, 2, 4, 8)), tp=8)
    ours = real.get_groups_and_subsamples(pairs, None)[1]
    whole = [[[i for i, _ in pairs]] * 8]
    worse = HydraulisCPScheduler(8_192, Group(8), space=cp_space(8, cps=(1, 2, 4, 8)), tp=8, never_worse=True)
    monkeypatch.setattr(adapter, "plan_cp_groups", lambda ranks, found: CPGroups(tuple(tuple(tuple(r) for r in g)
                                                                                       for g in whole)))
    monkeypatch.setattr(_Fixed, "plan", ours)
    monkeypatch.setattr(adapter, "megatron_scheduler", lambda: _Fixed)
    kept = CPGroups(tuple(tuple(tuple(r) for r in g) for g in worse.get_groups_and_subsamples(pairs, None)[1]))
    assert kept.groups == tuple(tuple(tuple(r) for r in g) for g in ours)
    assert cp_step_ms(kept, lengths, worse.ranks) < cp_step_ms(CPGroups(tuple(tuple(tuple(r) for r in g)
                                                                             for g in whole)), lengths, worse.ranks)


def test_never_worse_keeps_ours_when_megatrons_plan_overfills_a_rank(monkeypatch):
    import hydraulis.integrations.megatron as adapter

    pairs = [(0, 60_000)] + [(i, 500) for i in range(1, 16)]
    overfilled = [[[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]]
    monkeypatch.setattr(_Fixed, "plan", overfilled)
    monkeypatch.setattr(adapter, "megatron_scheduler", lambda: _Fixed)
    guarded = HydraulisCPScheduler(8_192, Group(8), space=cp_space(8, cps=(1, 2, 4, 8)), tp=8, never_worse=True)
    plain = HydraulisCPScheduler(8_192, Group(8), space=cp_space(8, cps=(1, 2, 4, 8)), tp=8)
    assert guarded.get_groups_and_subsamples(pairs, None) == plain.get_groups_and_subsamples(pairs, None)


@pytest.mark.parametrize("seed", range(3))
def test_never_worse_with_the_installed_megatron_is_at_most_both(seed):
    pairs = _lognormal(64, seed)
    lengths = [s for _, s in pairs]
    space = cp_space(8, cps=(1, 2, 4, 8))
    schedulers = (HydraulisCPScheduler(8_192, Group(8), space=space, tp=8, never_worse=True),
                  HydraulisCPScheduler(8_192, Group(8), space=space, tp=8), schedule.BalancedCPScheduler(8_192, Group(8)))
    plans = [CPGroups(tuple(tuple(tuple(r) for r in g) for g in s.get_groups_and_subsamples(pairs, None)[1]))
             for s in schedulers]
    guarded, *others = (cp_step_ms(p, lengths, schedulers[0].ranks) for p in plans)
    assert guarded == min(others)


def test_a_long_sample_is_not_widened_past_where_it_pays():
    """Drawn from the bundled long tail: one 62,566-token sample among 512 on 64 ranks. On CP 32 it
    runs fastest but its rank-time outgrows the rest; on CP 16 the step is one group, below Megatron's."""
    from pathlib import Path

    from hydraulis.artifacts import read_lengths

    pool = np.asarray(read_lengths(Path(__file__).resolve().parents[2] / "examples" / "data" / "longtail.txt"))
    space = cp_space(64, device="h100-80g", cps=(1, 2, 4, 8, 16, 32, 64))
    ours = HydraulisCPScheduler(8_192, Group(64), space=space, tp=8)
    lengths = np.minimum(np.random.default_rng(7).choice(pool, 512), ours.ranks.longest)
    pairs = list(enumerate(lengths.tolist()))
    plans = [CPGroups(tuple(tuple(tuple(r) for r in g) for g in scheduler.get_groups_and_subsamples(pairs, None)[1]))
             for scheduler in (ours, schedule.BalancedCPScheduler(8_192, Group(64)))]
    longest = int(np.argmax(lengths))
    assert lengths[longest] == 62_566
    assert [len(plans[0].holders(g).get(longest, ())) for g in range(len(plans[0].groups))] == [16]
    mine, theirs = (cp_step_ms(p, lengths, ours.ranks) for p in plans)
    assert mine < theirs
