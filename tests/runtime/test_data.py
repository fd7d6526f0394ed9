"""Training data: the docstring's worked example, synthetic documents made on demand, batches
that resume exactly where a saved position says."""

import itertools

import numpy as np

from hydraulis.data.loader import LoaderConfig, LoaderPosition
from hydraulis.runtime.data import SyntheticCorpus, TrainingData, synthetic_lengths


def test_worked_example_pieces_become_sequences_one_token_shorter():
    documents = (np.arange(6), np.arange(10, 12))
    batch = next(TrainingData(documents, LoaderConfig(8, 4, shuffle=False), "x").batches())
    assert batch.lengths == (3, 1, 1)
    assert [d.tolist() for d in batch.documents] == [[0, 1, 2, 3], [4, 5], [10, 11]]


def test_single_token_pieces_are_left_out():
    documents = (np.arange(5), np.arange(1))
    batch = next(TrainingData(documents, LoaderConfig(16, 4, shuffle=False), "x").batches())
    assert batch.lengths == (3,)


def test_synthetic_documents_are_deterministic_progressions():
    corpus = SyntheticCorpus([5, 300], 1024, 7)
    tokens = corpus[1][:]
    assert tokens.size == 300 and len(corpus[1]) == 300
    stride = (tokens[1] - tokens[0]) % 1024
    assert 1 <= stride <= 16 and np.array_equal(np.diff(tokens) % 1024, np.full(299, stride))
    assert np.array_equal(corpus[1][100:110], tokens[100:110])
    assert np.array_equal(SyntheticCorpus([5, 300], 1024, 7)[1][:], tokens)
    assert not np.array_equal(SyntheticCorpus([5, 300], 1024, 8)[1][:], tokens)


def test_batches_resume_at_a_saved_position():
    data = TrainingData(SyntheticCorpus(synthetic_lengths(64, 0), 1024, 0), LoaderConfig(256, 64, 0), "x")
    straight = list(itertools.islice(data.batches(), 6))
    resumed = list(itertools.islice(data.batches(straight[2].next_position), 3))
    assert [b.lengths for b in resumed] == [b.lengths for b in straight[3:]]
    assert all(np.array_equal(a, b) for x, y in zip(resumed, straight[3:]) for a, b in zip(x.documents, y.documents))
    assert all(sum(b.lengths) + len(b.lengths) <= 256 and max(b.lengths) < 64 for b in straight)
    assert straight[0].position == LoaderPosition(0, 0)
