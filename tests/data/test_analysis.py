import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.data.analysis import (
    AnalysisConfig,
    analyze_lengths,
    summarize_lengths,
    summarize_steps,
    tail_shares,
    token_label,
)
from hydraulis.data.loader import LoaderConfig, TokenBudgetLoader
from tests.data.test_loader import documents


def test_worked_example():
    summary = summarize_lengths(np.array([100, 100, 100, 10000]), AnalysisConfig(20000, 10000))
    assert summary.tail_document_share == 0.25
    assert summary.tail_token_share == pytest.approx(10000 / 10300)
    assert summary.tail_square_share == pytest.approx(1e8 / (3e4 + 1e8))
    assert (summary.documents, summary.tokens, summary.mean, summary.minimum, summary.maximum) == (4, 10300, 2575, 100, 10000)
    assert dict(summary.percentiles)[50.0] == 100
    bucket = next(b for b in summary.buckets if b.documents == 1)
    assert (bucket.low, bucket.high, bucket.label) == (8192, 16384, "(8K, 16K]")


@settings(max_examples=50, deadline=None)
@given(lengths=st.lists(st.integers(1, 300_000), min_size=1, max_size=300))
def test_buckets_partition_documents_tokens_and_squares(lengths):
    s = np.array(lengths)
    summary = summarize_lengths(s, AnalysisConfig(300_000, 300_000))
    assert sum(b.documents for b in summary.buckets) == s.size
    assert sum(b.tokens for b in summary.buckets) == s.sum()
    for share in ("document_share", "token_share", "square_share"):
        assert sum(getattr(b, share) for b in summary.buckets) == pytest.approx(1.0)
    above = [b for b in summary.buckets if b.low >= summary.tail_threshold]
    assert sum(b.token_share for b in above) == pytest.approx(summary.tail_token_share, abs=1e-12)
    assert sum(b.square_share for b in above) == pytest.approx(summary.tail_square_share, abs=1e-12)
    assert [v for _, v in summary.percentiles] == sorted(v for _, v in summary.percentiles)
    assert all(v in set(lengths) for _, v in summary.percentiles)


def test_step_maxima_are_those_of_the_loaders_batches():
    lengths = np.random.default_rng(0).integers(1, 20_000, 300)
    config = AnalysisConfig(token_budget=40_000, max_seq_len=8192, steps=250, seed=3)
    steps = summarize_steps(lengths, config)
    loader = TokenBudgetLoader(documents(lengths), LoaderConfig(40_000, 8192, 3))
    batches = [b for _, b in zip(range(250), loader.batches())]
    assert steps.maxima.tolist() == [int(b.lengths.max()) for b in batches]
    assert steps.tokens.tolist() == [int(b.lengths.sum()) for b in batches]
    assert steps.square_sums.tolist() == [float((b.lengths.astype(float) ** 2).sum()) for b in batches]
    assert steps.epochs == batches[-1].position.epoch + 1
    assert steps.steps == 250 and steps.share_above(8191) == np.mean(steps.maxima > 8191)


def test_analysis_bundles_config_lengths_and_steps():
    analysis = analyze_lengths([5, 7, 9000], AnalysisConfig(10_000, 10_000, steps=3))
    assert analysis.lengths.documents == 3 and analysis.steps.steps == 3
    assert analysis.steps.maxima.tolist() == [9000, 9000, 9000]


def test_token_labels():
    assert [token_label(v) for v in (100, 1024, 8192, 1 << 20, 1536)] == ["100", "1K", "8K", "1M", "1536"]


@pytest.mark.parametrize("call, needle", [
    (lambda: AnalysisConfig(100, 1000), "token_budget: 100 is smaller than one sequence of max_seq_len = 1000"),
    (lambda: AnalysisConfig(1000, 100, steps=0), "steps: 0 must be between 1 and 100000"),
    (lambda: AnalysisConfig(1000, 100, bucket_edges=(10, 5)), "must be strictly increasing"),
    (lambda: AnalysisConfig(1000, 100, bucket_edges=()), "must list at least one edge"),
    (lambda: analyze_lengths([], AnalysisConfig(1000, 100)), "is empty"),
    (lambda: analyze_lengths([3, 0], AnalysisConfig(1000, 100)), r"lengths\[1\]: 0 must be a positive length"),
])
def test_bad_input(call, needle):
    with pytest.raises(HydraulisError, match=needle):
        call()


def test_tail_shares_match_the_summary():
    lengths = np.array([100, 100, 100, 10000])
    summary = summarize_lengths(lengths, AnalysisConfig(20000, 10000))
    assert tail_shares(lengths) == (summary.tail_document_share, summary.tail_token_share, summary.tail_square_share)
