"""The synthesis memory: planned strategies take their new ratios, new ones come after the old,
the winner first, the oldest forgotten past the size; invalid fields named."""

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import Strategy
from hydraulis.dispatch.synthesis_memory import Remembered, SynthesisMemory
from tests.dispatch.helpers import group


def strategy(count: int) -> Strategy:
    return Strategy((group(1, count, 100, 0.0, 1.0, 0.0),))


A, B, C, D = (strategy(n) for n in (1, 2, 3, 4))


def test_after_updates_ratios_appends_new_puts_the_winner_first_and_forgets_the_oldest():
    memory = SynthesisMemory((Remembered(A, 1.1), Remembered(B, 1.2)), size=3)
    later = memory.after([Remembered(B, 1.5), Remembered(C, 1.3)], winner=C)
    assert later.entries == (Remembered(C, 1.3), Remembered(A, 1.1), Remembered(B, 1.5))
    assert later.after([Remembered(D, 1.0)], winner=None).entries == (
        Remembered(C, 1.3), Remembered(A, 1.1), Remembered(B, 1.5))
    assert later.after([Remembered(D, 1.0)], winner=D).entries[0] == Remembered(D, 1.0)
    assert memory.entries == (Remembered(A, 1.1), Remembered(B, 1.2)), "frozen: after returns a new memory"


def test_invalid_memory_is_named():
    with pytest.raises(HydraulisError, match="remembered.ratio"):
        Remembered(A, 0.0)
    with pytest.raises(HydraulisError, match="synthesis_memory.size"):
        SynthesisMemory(size=0)
    with pytest.raises(HydraulisError, match="synthesis_memory.entries"):
        SynthesisMemory((Remembered(A, 1.0), Remembered(B, 1.0)), size=1)
