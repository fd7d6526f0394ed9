import numpy as np
import pytest

from hydraulis.base.types import BatchingMethod, PipelineClass, PipelinePlans, Scheme
from hydraulis.dispatch import dispatch
from tests.dispatch.helpers import group, proposal

FAST = group(pp=1, count=2, capacity=1000, a=0.0, b=1.0, c=0.5)
SLOWER_TWIN = group(pp=1, count=3, capacity=1000, a=0.0, b=2.0, c=0.5)
DEEP = group(pp=2, count=1, capacity=2000, a=0.0, b=1.0, c=0.5)


@pytest.mark.parametrize("method", list(BatchingMethod))
def test_the_plan_holds_each_class_once_and_expands_to_every_pipeline(method):
    lengths = np.random.default_rng(2).integers(1, 900, 40).tolist()
    plan = dispatch(proposal((FAST, SLOWER_TWIN, DEEP)), lengths, method)
    assert plan.pipelines.classes == (PipelineClass(Scheme(1, 1, 1), 1000, 5), PipelineClass(Scheme(1, 1, 2), 2000, 1))
    assert PipelinePlans.of(tuple(plan.pipelines)) == plan.pipelines
    every = plan.pipelines.micro_batches
    assert sorted(every.sequences.tolist()) == list(range(len(lengths)))
    assert every.lengths.tolist() == [lengths[s] for s in every.sequences]
    assert [s for p in plan.pipelines for mb in p.micro_batches for s in mb.sequences] == every.sequences.tolist()
