"""bf16 compute with fp32 gradient accumulation equals fp32 single-device training within the
documented bf16 tolerance (gloo, CPU, 2 processes)."""

import pytest

from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.equivalence import BF16_TOLERANCE, check_equivalence
from hydraulis.runtime.run import resolve_run
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind, Precision, ReduceDtype

pytestmark = pytest.mark.distributed


def test_bf16_check_equivalence_on_the_cpu_is_within_the_documented_tolerance():
    options = RuntimeOptions(device=DeviceKind.CPU, precision=Precision.BF16, grad_reduce_dtype=ReduceDtype.BF16,
                             optimizer=OptimizerKind.ADAM, lr=1e-4)
    config = TrainConfig("tiny", ("1,2,1[sp]", "2,1,1", "1,1,1x2"), 3, token_budget=192, max_seq_len=32,
                         micro_batch_tokens=48, runtime=options)
    (result,) = check_equivalence([resolve_run(config)], options, nproc=2)
    assert 1e-4 < result.max_grad_rel_diff <= BF16_TOLERANCE, result.max_grad_rel_diff
    assert result.max_rel_diff <= BF16_TOLERANCE
