from collections import Counter
from itertools import islice

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.data.loader import LoaderConfig, LoaderPosition, TokenBudgetLoader, plan_epoch


def documents(lengths, vocab=50_000):
    """Document ``i`` holds tokens ``i·vocab + 0 … i·vocab + s_i − 1``: every token is unique."""
    return [np.arange(n, dtype=np.int64) + i * vocab for i, n in enumerate(lengths)]


def as_lists(batches):
    return [(b.position, b.next_position, b.documents.tolist(), b.lengths.tolist(), [t.tolist() for t in b.tokens])
            for b in batches]


def test_worked_example():
    loader = TokenBudgetLoader(documents([700, 300, 2500, 100]), LoaderConfig(1500, 1000, shuffle=False))
    batches = list(loader.batches(end_epoch=1))
    assert [b.lengths.tolist() for b in batches] == [[700, 300], [1000], [1000, 500], [100]]
    assert batches[2].documents.tolist() == [2, 2]
    assert [t[0] for t in batches[2].tokens] == [2 * 50_000 + 1000, 2 * 50_000 + 2000]
    assert [b.next_position for b in batches][-2:] == [LoaderPosition(0, 3), LoaderPosition(1, 0)]
    resumed = list(loader.batches(LoaderPosition(0, 2), end_epoch=1))
    assert [b.lengths.tolist() for b in resumed] == [[1000, 500], [100]]


lengths_lists = st.lists(st.integers(1, 3000), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_lists, cap=st.integers(1, 1200), extra=st.integers(0, 2000), seed=st.integers(0, 2**32),
       epoch=st.integers(0, 5))
def test_an_epoch_holds_every_token_exactly_once(lengths, cap, extra, seed, epoch):
    docs = documents(lengths)
    config = LoaderConfig(cap + extra, cap, seed)
    batches = list(TokenBudgetLoader(docs, config).batches(LoaderPosition(epoch, 0), end_epoch=epoch + 1))
    seen = Counter(t for b in batches for piece in b.tokens for t in piece.tolist())
    assert seen == Counter(t for d in docs for t in d.tolist())
    assert all(b.lengths.sum() <= config.token_budget and b.lengths.max() <= cap for b in batches)
    assert all(b.lengths.tolist() == [p.size for p in b.tokens] for b in batches)
    assert all(b.position == LoaderPosition(epoch, i) for i, b in enumerate(batches))


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_lists, cap=st.integers(1, 1200), extra=st.integers(0, 2000), seed=st.integers(0, 1000),
       stop=st.integers(0, 40))
def test_resuming_from_a_saved_position_gives_the_uninterrupted_batches(lengths, cap, extra, seed, stop):
    loader = TokenBudgetLoader(documents(lengths), LoaderConfig(cap + extra, cap, seed))
    uninterrupted = as_lists(islice(loader.batches(), stop + 25))
    interrupted = list(islice(loader.batches(), stop + 1))
    saved = interrupted[-1].next_position
    restarted = TokenBudgetLoader(documents(lengths), LoaderConfig(cap + extra, cap, seed))
    resumed = as_lists(islice(restarted.batches(saved), 24))
    assert as_lists(interrupted) + resumed == uninterrupted


def test_shuffle_is_deterministic_by_seed_and_changes_with_epoch_and_seed():
    lengths = np.arange(1, 200)
    config = LoaderConfig(4000, 1000, seed=7)
    first, again = plan_epoch(lengths, config, 0), plan_epoch(lengths, config, 0)
    assert first.documents.tolist() == again.documents.tolist()
    assert first.documents.tolist() != plan_epoch(lengths, config, 1).documents.tolist()
    assert first.documents.tolist() != plan_epoch(lengths, LoaderConfig(4000, 1000, seed=8), 0).documents.tolist()
    unshuffled = plan_epoch(lengths, LoaderConfig(4000, 1000, shuffle=False), 3)
    assert unshuffled.documents.tolist() == list(range(199))


def test_pieces_of_a_cut_document_stay_adjacent_and_in_order():
    plan = plan_epoch([2500, 10, 3000], LoaderConfig(10_000, 1000, seed=1), 0)
    for document in (0, 2):
        where = np.flatnonzero(plan.documents == document)
        assert (np.diff(where) == 1).all()
        assert plan.starts[where].tolist() == list(range(0, 1000 * where.size, 1000))


@pytest.mark.parametrize("call, needle", [
    (lambda: LoaderConfig(1000, 4096), "token_budget: 1000 is smaller than one sequence of max_seq_len = 4096 tokens"),
    (lambda: LoaderConfig(0, 1), "token_budget: 0 must be >= 1"),
    (lambda: LoaderConfig(10, 10, seed=-1), "seed: -1 must be >= 0"),
    (lambda: LoaderPosition(-1, 0), "position.epoch: -1 must be >= 0"),
    (lambda: TokenBudgetLoader([], LoaderConfig(10, 10)), "lengths: '\\[\\]' is empty"),
    (lambda: TokenBudgetLoader([np.arange(3), np.arange(0)], LoaderConfig(10, 10)),
     r"lengths\[1\]: 0 must be a positive length"),
    (lambda: next(TokenBudgetLoader([np.arange(3)], LoaderConfig(10, 10)).batches(LoaderPosition(0, 1))),
     "position.batch: 1 is past the last batch of epoch 0, which has 1"),
    (lambda: plan_epoch([1.5], LoaderConfig(10, 10), 0), "lengths: 'float64' must be integers"),
])
def test_bad_input(call, needle):
    with pytest.raises(HydraulisError, match=needle):
        call()
