import pytest

from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.stages import even_split
from hydraulis.base.types import Cluster, Recompute, Scheme
from hydraulis.profiler.analytic import analytic_profile
from hydraulis.sharding.activations import stage_bytes_per_token


def profile(scheme: Scheme, devices: int = 64):
    return analytic_profile(model_preset("llama-7b"), device_preset("a800-80g"), Cluster(devices, 8, "a800-80g"), scheme)


def test_worked_example_dense_term():
    # b_flop of the docstring; (1,1,2) has no tp/cp traffic and only the pp hand-off on top
    p = profile(Scheme(1, 1, 2))
    assert p.time.b == pytest.approx(0.0925 + 4 * 4096 / 200e6, rel=0.01)


def test_sharding_divides_work_and_memory():
    base, tp2, cp2 = profile(Scheme(1, 1, 1)), profile(Scheme(1, 2, 1)), profile(Scheme(2, 1, 1))
    assert tp2.time.a == pytest.approx(base.time.a / 2)
    assert cp2.time.a == pytest.approx(base.time.a / 2)
    assert base.time.b / 2 < tp2.time.b < base.time.b
    assert base.activation_bytes_per_token / 2 < tp2.activation_bytes_per_token < base.activation_bytes_per_token
    assert base.activation_bytes_per_token / 2 < cp2.activation_bytes_per_token < base.activation_bytes_per_token


@pytest.mark.parametrize("scheme", [Scheme(1, 1, 1), Scheme(1, 8, 1), Scheme(2, 2, 4), Scheme(1, 4, 8)])
def test_activations_are_the_runtimes_accounting_of_the_most_loaded_stage(scheme):
    model = model_preset("llama-7b")
    split = even_split(model.layers, scheme.pp)
    stages = [stage_bytes_per_token(model, scheme, (Recompute.NONE,) * layers, stage, 2)
              for stage, layers in enumerate(split)]
    assert profile(scheme).activation_bytes_per_token == max(stages)
    assert stages[0] == max(stages)


def test_tensor_parallel_across_nodes_pays_the_network():
    inside, across = profile(Scheme(1, 8, 1)), profile(Scheme(1, 16, 1))
    assert across.time.b > inside.time.b / 2 * 1.5


def test_space_skips_schemes_larger_than_the_cluster(space_32b_analytic):
    assert all(p.scheme.devices <= 1024 for p in space_32b_analytic.profiles)
    assert len(space_32b_analytic.profiles) == 64


def test_recomputation_costs_forward_work_again():
    from hydraulis.base.types import Recompute

    base = profile(Scheme(1, 2, 1))
    selective = profile(Scheme(1, 2, 1, recompute=Recompute.SELECTIVE))
    full = profile(Scheme(1, 2, 1, recompute=Recompute.FULL))
    assert selective.time.a == pytest.approx(base.time.a * 9 / 7) and selective.time.b == base.time.b
    assert full.time.a == selective.time.a and full.time.b > base.time.b * 1.25 and full.time.c > base.time.c


def test_space_lists_every_variant_as_a_scheme():
    from hydraulis.base.types import SchemeOptions
    from hydraulis.profiler.analytic import analytic_scheme_space

    spec = device_preset("h100-80g")
    space = analytic_scheme_space(model_preset("llama-7b"), spec, Cluster(16, 8, "h100-80g"), (1,), (1, 2), (1,),
                                  created="2026-01-01T00:00:00+00:00", tool_version="test",
                                  variants=(SchemeOptions(), SchemeOptions(sp=True)))
    assert [str(p.scheme) for p in space.profiles] == ["(1,1,1)", "(1,2,1)", "(1,2,1)[sp]"]


def test_an_analytic_space_prices_the_runtimes_gradients_on_its_device():
    """bf16 gradients on a GPU, fp32 on the CPU: the runtime's ``--grad-reduce-dtype auto``."""
    from tests.conftest import analytic_space

    assert analytic_space(device="h100-80g", devices=8).grad_reduce_bytes == 2
    assert analytic_space("tiny", "cpu", 4).grad_reduce_bytes == 4
