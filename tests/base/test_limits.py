"""The limits of every number: what each refuses and says, and docs/cli.md's table of them."""

import math
import re
from pathlib import Path

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.limits import DEVICES, LIMITS, SEQUENCES, TIME_LIMIT_S, check_sequences

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("limit, value, problem", [
    (DEVICES, 0, "must be between 1 and 65536 (devices in the cluster)"),
    (DEVICES, 65_537, "must be between 1 and 65536 (devices in the cluster)"),
    (DEVICES, 10**30, "must be between 1 and 65536 (devices in the cluster)"),
    (DEVICES, 1.5, "must be an integer"),
    (DEVICES, math.nan, "must be an integer"),
    (DEVICES, math.inf, "must be between 1 and 65536 (devices in the cluster)"),
    (DEVICES, "8", "must be an integer"),
    (DEVICES, True, "must be an integer"),
    (TIME_LIMIT_S, 0.0, "must be > 0 and <= 86400 (seconds of planning before the safety stop)"),
    (TIME_LIMIT_S, math.nan, "must be a number"),
    (TIME_LIMIT_S, -math.inf, "must be > 0 and <= 86400 (seconds of planning before the safety stop)"),
])
def test_a_value_outside_its_limit_is_named_with_the_range(limit, value, problem):
    assert limit.problem(value) == problem
    with pytest.raises(HydraulisError) as error:
        limit.check(value, "field")
    assert error.value.field == "field" and str(error.value).endswith(problem)


def test_values_inside_are_returned_in_their_type():
    assert DEVICES.check(64.0) == 64 and isinstance(DEVICES.check(64.0), int)
    assert DEVICES.check(1) == 1 and DEVICES.check(65_536) == 65_536
    assert TIME_LIMIT_S.check(20) == 20.0 and isinstance(TIME_LIMIT_S.check(20), float)
    assert DEVICES.interval == "[1, 65536]" and TIME_LIMIT_S.interval == "(0, 86400]"


def test_work_beyond_the_sequences_limit_is_refused_naming_the_input():
    check_sequences(SEQUENCES.maximum, "steps", 10, "sequences")
    with pytest.raises(HydraulisError, match=r"^steps: 1000 makes 1001 × 70000 = 70070000 sequences, above"):
        check_sequences(1001 * 70_000, "steps", 1000, "1001 × 70000")


def test_the_command_reference_lists_every_limit_with_its_range():
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| [^|]+ \| (\S+, \S+) \|$", (ROOT / "docs" / "cli.md").read_text(), re.M))
    assert rows == {name: limit.interval for name, limit in LIMITS.items()}
