"""The planner chooses expert parallelism with cp/tp/pp for a mixture of experts: Mixtral-8x7B
on 64 H100s holds its experts only with ``ep > 1``, and every proposed pipeline fits in memory."""

import numpy as np
import pytest

from hydraulis.io.simulation_inputs import scheme_space_for
from hydraulis.planner import PlannerConfig, Variants, propose


@pytest.mark.slow
def test_mixtral_on_64_h100s_is_planned_with_expert_parallelism_within_memory():
    space, _ = scheme_space_for(None, "mixtral-8x7b", "h100-80g", 64, None, segments=True)
    lengths = np.random.default_rng(0).lognormal(6.5, 1.3, 4000).astype(int).clip(16, 32768)
    config = PlannerConfig(devices=64, devices_per_node=8, token_budget=200_000, max_seq_len=32768, strategies=4,
                           steps=16, seed=0, variants=Variants.ALL)
    proposal = propose(space, lengths, config)
    pipelines = [g for s in proposal.strategies for g in s.strategy.pipelines]
    assert pipelines and all(g.scheme.ep > 1 for g in pipelines)
    assert all(headroom >= 0 for s in proposal.strategies for headroom in s.headroom_bytes)
    assert all(s.strategy.devices <= 64 for s in proposal.strategies)
