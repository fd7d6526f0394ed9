import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.fused import FusedProblem, Placement, fused_model


def test_per_micro_batch_forms_normalise_to_replica_rows():
    model = fused_model("a", 2, 2, "reverse", [2, 3], [[1, 2], [3, 4, 5]], None, 1.5)
    assert model.micro_batches == (2, 3)
    assert model.backward_ms == ((2.0, 4.0), (6.0, 8.0, 10.0))
    assert model.memory_per_micro_batch == ((1.5, 1.5), (1.5, 1.5, 1.5))
    assert fused_model("b", 1, 2, "forward", 2, [1, 2]).forward_ms == ((1.0, 2.0), (1.0, 2.0))


def test_placement_puts_reverse_stages_backwards_within_each_replica():
    model = fused_model("a", 4, 2, Placement.REVERSE, 1, 1.0)
    assert [model.device(1, s) for s in range(4)] == [7, 6, 5, 4]
    assert [fused_model("b", 4, 2, "forward", 1, 1.0).device(1, s) for s in range(4)] == [4, 5, 6, 7]


@pytest.mark.parametrize("kwargs, field", [
    ({"placement": "sideways"}, "placement"),
    ({"micro_batches": 0}, "micro_batches"),
    ({"micro_batches": -2}, "micro_batches"),
    ({"forward_ms": 0.0}, "forward_ms"),
    ({"forward_ms": -1.0}, "forward_ms"),
    ({"backward_ms": [1.0, -1.0, 1.0]}, "backward_ms"),
    ({"forward_ms": [1.0, 2.0]}, "forward_ms"),
    ({"memory_per_micro_batch": -1.0}, "memory_per_micro_batch"),
])
def test_bad_models_name_the_field(kwargs, field):
    arguments = {"name": "a", "stages": 4, "replicas": 1, "placement": "forward", "micro_batches": 3,
                 "forward_ms": 1.0} | kwargs
    with pytest.raises(HydraulisError) as error:
        fused_model(**arguments)
    assert error.value.field.startswith(field)


def test_stages_times_replicas_must_equal_devices():
    with pytest.raises(HydraulisError, match=r"models\[0\]\.replicas"):
        FusedProblem(8, (fused_model("a", 4, 1, "forward", 2, 1.0),))
