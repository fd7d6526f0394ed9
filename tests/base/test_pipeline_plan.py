import pickle
from dataclasses import replace

import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.step_plan import pipeline_classes
from hydraulis.base.types import (
    BatchingMethod,
    MicroBatch,
    MicroBatches,
    PipelineClass,
    PipelinePlan,
    PipelinePlans,
    Scheme,
    StepPlan,
)

WIDE, LONG = Scheme(1, 8, 1), Scheme(1, 16, 1)


def docstring_example() -> PipelinePlans:
    """The module docstring's worked example."""
    return PipelinePlans(
        classes=(PipelineClass(WIDE, 32768, 2), PipelineClass(LONG, 131072, 1)),
        micro_batches=MicroBatches(sequences=[4, 0, 2, 5, 1, 3, 6], lengths=[40, 50, 60, 70, 80, 90, 100],
                                   bounds=[0, 2, 3, 4, 5, 7]),
        pipeline_bounds=[0, 2, 3, 5], predicted_ms=[3.0, 2.0, 4.5], solver_status=("greedy", "optimal", "greedy"),
        proven_ms=[np.nan, 2.0, np.nan])


def eager_pipelines(rng: np.random.Generator) -> tuple[PipelinePlan, ...]:
    """Random pipelines as a caller writes them by hand: one tuple of :class:`MicroBatch` each."""
    schemes = [(WIDE, 32768), (LONG, 131072), (Scheme(2, 4, 2), 65536)]
    pipelines, sequence = [], 0
    for _ in range(int(rng.integers(0, 7))):
        scheme, max_seq_len = schemes[int(rng.integers(len(schemes)))]
        micro_batches = []
        for _ in range(int(rng.integers(0, 4))):
            size = int(rng.integers(1, 5))
            micro_batches.append(MicroBatch(tuple(range(sequence, sequence + size)),
                                            tuple(int(s) for s in rng.integers(1, 9000, size))))
            sequence += size
        proven = None if rng.random() < 0.5 else float(rng.random())
        pipelines.append(PipelinePlan(scheme, max_seq_len, tuple(micro_batches), float(rng.random()),
                                      str(rng.choice(["greedy", "optimal"])), proven))
    return tuple(pipelines)


def test_docstring_example_expands_as_documented():
    pipelines = docstring_example()
    assert len(pipelines) == 3
    assert [p.scheme for p in pipelines] == [WIDE, WIDE, LONG]
    assert [p.max_seq_len for p in pipelines] == [32768, 32768, 131072]
    assert pipelines[0].micro_batches == (MicroBatch((4, 0), (40, 50)), MicroBatch((2,), (60,)))
    assert pipelines[1].micro_batches == (MicroBatch((5,), (70,)),)
    assert tuple(pipelines[-1].micro_batches) == (MicroBatch((1,), (80,)), MicroBatch((3, 6), (90, 100)))
    assert [p.proven_ms for p in pipelines] == [None, 2.0, None]
    assert [p.solver_status for p in pipelines] == ["greedy", "optimal", "greedy"]
    assert pipelines[0:2] == (pipelines[0], pipelines[1])


@pytest.mark.parametrize("seed", range(20))
def test_lazy_expansion_equals_eager(seed):
    eager = eager_pipelines(np.random.default_rng(seed))
    compact = PipelinePlans.of(eager)
    assert tuple(compact) == eager
    assert [tuple(p.micro_batches) for p in compact] == [tuple(p.micro_batches) for p in eager]
    assert PipelinePlans.of(tuple(compact)) == compact
    assert sum(c.count for c in compact.classes) == len(eager)
    for a, b in zip(compact.classes, compact.classes[1:]):
        assert (a.scheme, a.max_seq_len) != (b.scheme, b.max_seq_len)


@pytest.mark.parametrize("alignment", [1, 8, 128])
@pytest.mark.parametrize("seed", range(5))
def test_flat_tokens_and_cu_seqlens_equal_the_micro_batches(seed, alignment):
    eager = [mb for p in eager_pipelines(np.random.default_rng(seed)) for mb in p.micro_batches]
    compact = MicroBatches.of(eager)
    assert compact.tokens.tolist() == [mb.tokens for mb in eager]
    assert compact.cu_seqlens(alignment).tolist() == [c for mb in eager for c in mb.cu_seqlens(alignment)]


def test_windows_share_the_arrays_and_nothing_is_writable():
    pipelines = docstring_example()
    window = pipelines[1].micro_batches
    assert np.shares_memory(window.sequences, pipelines.micro_batches.sequences)
    for array in (window.sequences, window.bounds, pipelines.pipeline_bounds, pipelines.proven_ms,
                  pipelines.micro_batches.lengths, pipelines.class_of):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1


def test_unpickled_plans_stay_read_only():
    plan = pickle.loads(pickle.dumps(docstring_example()))
    assert plan == docstring_example()
    for array in (plan.micro_batches.sequences, plan.pipeline_bounds, plan.class_of, plan[0].micro_batches.bounds):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1


def test_the_callers_arrays_are_copied_not_frozen():
    sequences = np.array([0, 1, 2])
    micro_batches = MicroBatches(sequences, np.array([5, 6, 7]), np.array([0, 1, 3]))
    sequences[0] = 9
    assert micro_batches[0] == MicroBatch((0,), (5,))


def test_equality_compares_what_is_planned():
    plan = docstring_example()
    assert plan == docstring_example()
    longer = MicroBatches(plan.micro_batches.sequences, plan.micro_batches.lengths + 1, plan.micro_batches.bounds)
    assert replace(plan, micro_batches=longer) != plan
    assert replace(plan, proven_ms=[np.nan, np.nan, np.nan]) != plan
    assert replace(plan, pipeline_bounds=[0, 1, 3, 5]) != plan
    assert replace(plan, classes=(PipelineClass(WIDE, 32768, 1), PipelineClass(LONG, 131072, 2))) != plan
    assert plan.micro_batches != MicroBatches([4, 0, 2, 5, 1, 3, 6], [40, 50, 60, 70, 80, 90, 100], [0, 1, 3, 4, 5, 7])


def test_step_plan_stores_given_pipelines_compactly():
    eager = eager_pipelines(np.random.default_rng(3))
    plan = StepPlan(0, BatchingMethod.DISPATCH_BALANCED_PACKING, 1.0, 1.0, 0.0, eager)
    assert isinstance(plan.pipelines, PipelinePlans)
    assert plan.pipelines == eager
    assert replace(plan, strategy_index=1).pipelines is plan.pipelines
    assert plan == StepPlan(0, BatchingMethod.DISPATCH_BALANCED_PACKING, 1.0, 1.0, 0.0, list(eager))


def test_pipeline_classes_merge_neighbours_only():
    assert pipeline_classes([(WIDE, 10, 2), (WIDE, 10, 3), (LONG, 10, 1), (WIDE, 10, 1)]) == (
        PipelineClass(WIDE, 10, 5), PipelineClass(LONG, 10, 1), PipelineClass(WIDE, 10, 1))
    assert pipeline_classes([(WIDE, 10, 1), (WIDE, 20, 1)]) == (PipelineClass(WIDE, 10, 1), PipelineClass(WIDE, 20, 1))


@pytest.mark.parametrize(("change", "message"), [
    ({"classes": (PipelineClass(WIDE, 32768, 1), PipelineClass(WIDE, 32768, 1), PipelineClass(LONG, 131072, 1))},
     "pipelines.classes: .* must not repeat a class"),
    ({"classes": (PipelineClass(WIDE, 32768, 2),)}, r"pipelines.pipeline_bounds: 3 must have one entry per pipeline \(2"),
    ({"predicted_ms": [1.0, 2.0]}, r"pipelines.predicted_ms: 2 must have one entry per pipeline \(3"),
    ({"solver_status": ("greedy",)}, r"pipelines.solver_status: 1 must have one entry"),
    ({"pipeline_bounds": [0, 3, 2, 5]}, "pipelines.pipeline_bounds: .* must rise from 0 to the number of micro-batches"),
    ({"pipeline_bounds": [0, 2, 3, 4]}, r"must rise from 0 to the number of micro-batches \(5\)"),
    ({"predicted_ms": ["fast", 1.0, 2.0]}, "pipelines.predicted_ms: .* must be a list of numbers"),
])
def test_pipelines_are_checked(change, message):
    with pytest.raises(HydraulisError, match=message):
        replace(docstring_example(), **change)


@pytest.mark.parametrize(("arrays", "message"), [
    (([0, 1], [5], [0, 2]), r"micro_batches.lengths: 1 must have one entry per sequence \(2\)"),
    (([0, 1], [5, 6], [0, 1]), r"micro_batches.bounds: \[0, 1\] must rise from 0 to the number of sequences \(2\)"),
    (([0.5, 1], [5, 6], [0, 2]), "micro_batches.sequences: .* must be a list of integers"),
    (([[0, 1]], [5, 6], [0, 2]), "micro_batches.sequences: .* must be a list of integers"),
])
def test_micro_batches_are_checked(arrays, message):
    with pytest.raises(HydraulisError, match=message):
        MicroBatches(*arrays)


def test_micro_batch_lengths_must_be_integers():
    with pytest.raises(HydraulisError, match="micro_batches.lengths: .* must be a list of integers"):
        PipelinePlan(WIDE, 10, (MicroBatch((0,), (4.5,)),), 1.0)


def test_pipeline_times_must_be_numbers():
    with pytest.raises(HydraulisError, match="pipelines.predicted_ms: .* must be a list of numbers"):
        StepPlan(0, BatchingMethod.PADDING, 1.0, 1.0, 0.0, (PipelinePlan(WIDE, 10, (), "slow"),))


def test_pipeline_class_counts_at_least_one():
    with pytest.raises(HydraulisError, match="pipeline_class.count: 0 must be >= 1"):
        PipelineClass(WIDE, 10, 0)
