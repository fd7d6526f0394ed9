"""Steps assigned for any runtime: ids kept, every stage's layers, predicted times, one strategy on demand."""

from dataclasses import replace
from itertools import pairwise

import numpy as np
import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.assigned_steps import Samples, assign_steps
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions, plan_step
from tests.dispatch.helpers import EXAMPLES, example_proposal

METHOD = BatchingMethod.DISPATCH_BALANCED_PACKING
OFF = SynthesisOptions(Synthesise.OFF)


def steps(count: int) -> list[Samples]:
    lengths = read_lengths(EXAMPLES / "data" / "longtail.txt")[:40 * count].tolist()
    return [Samples(tuple(f"d{k}-{i}" for i in range(40)), tuple(lengths[40 * k:40 * (k + 1)])) for k in range(count)]


def test_ids_layers_and_times():
    proposal = example_proposal("7b_32dev")
    for k, step in enumerate(assign_steps(proposal, steps(2), METHOD, DispatchOptions(), OFF)):
        assert step.step == k and step.ids[0] == f"d{k}-0"
        for scheme, layers in zip(step.assignments.schemes, step.stage_layers):
            assert layers[0][0] == 0 and layers[-1][1] == proposal.model.layers
            assert len(layers) == scheme.pp and all(a[1] == b[0] for a, b in pairwise(layers))
        assert max(step.pipeline_ms) <= step.predicted_ms
        assert step.strategy == str(proposal.strategies[step.strategy_index].strategy)


def test_a_single_strategy_is_the_one_fastest_over_the_steps():
    proposal = example_proposal("7b_32dev")
    found = assign_steps(proposal, steps(3), METHOD, DispatchOptions(), OFF, single_strategy=True)
    assert len({s.strategy_index for s in found}) == 1
    chosen = found[0].strategy_index
    totals = []
    for index in range(len(proposal.strategies)):
        only = replace(proposal, strategies=(proposal.strategies[index],))
        try:
            totals.append(sum(plan_step(only, np.asarray(s.lengths), METHOD, DispatchOptions(), OFF).predicted_ms
                              for s in steps(3)))
        except HydraulisError:
            totals.append(float("inf"))
    assert totals[chosen] == min(totals)
    assert sum(s.predicted_ms for s in found) == pytest.approx(totals[chosen])


def test_a_single_strategy_refuses_synthesis():
    with pytest.raises(HydraulisError, match="^synthesise: 'proposal' makes a strategy per step"):
        assign_steps(example_proposal("7b_32dev"), steps(1), METHOD, DispatchOptions(),
                     SynthesisOptions(Synthesise.PROPOSAL), single_strategy=True)


@pytest.mark.parametrize("ids, lengths, message", [
    (("a", "a"), (1, 2), r"samples\[1\].id: 'a' repeats"),
    (("a",), (0,), r"samples\[0\].length: 0 must be >= 1"),
    ((), (), "samples: 0 must be at least one"),
])
def test_bad_samples(ids, lengths, message):
    with pytest.raises(HydraulisError, match=message):
        Samples(ids, lengths)
