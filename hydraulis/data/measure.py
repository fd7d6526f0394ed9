"""A corpus measured in tokens: load it, obtain its tokenizer, tokenize every document.

The recipe behind ``hydraulis analyze --corpus`` and the training runtime's data:
``measure_corpus(source, spec)`` gives the token ids and lengths of every non-empty document
(in corpus order), ready for :class:`hydraulis.data.loader.TokenBudgetLoader` and
:func:`hydraulis.data.analysis.analyze_lengths`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hydraulis.data.corpus import Corpus, CorpusSource, load_corpus
from hydraulis.data.tokenizer import ReadyTokenizer, TokenizedCorpus, TokenizerSpec, obtain_tokenizer, tokenize_corpus


@dataclass(frozen=True)
class MeasuredCorpus:
    corpus: Corpus
    tokenizer: ReadyTokenizer
    tokenized: TokenizedCorpus

    @property
    def lengths(self) -> np.ndarray:
        return self.tokenized.lengths

    def facts(self) -> tuple[tuple[str, object], ...]:
        """What was measured, as (label, value) pairs for reports."""
        corpus, tokenizer, tokenized = self.corpus, self.tokenizer, self.tokenized
        return (
            ("corpus", str(corpus.source.path)),
            ("format", corpus.source.format.value),
            ("text field", corpus.source.text_field),
            ("documents", corpus.documents),
            ("empty documents skipped", corpus.empty),
            ("undecodable files skipped", corpus.skipped_undecodable),
            ("documents without tokens skipped", tokenized.dropped),
            ("bytes", corpus.bytes),
            ("content hash", corpus.content_hash),
            ("tokenizer", str(tokenizer.path) if tokenizer.path else "trained, not cached"),
            ("tokenizer origin", tokenizer.origin),
            ("vocabulary size", tokenizer.vocab_size),
            ("tokens", tokenized.tokens),
            ("tokens per byte", round(tokenized.tokens_per_byte, 4)),
        )


def measure_corpus(source: CorpusSource, spec: TokenizerSpec, cache_dir: str | Path | None = None) -> MeasuredCorpus:
    """Load ``source`` (``datasets``' Arrow cache in ``cache_dir``), obtain the tokenizer
    ``spec`` names (trained on the corpus unless a file is given) and tokenize the corpus."""
    corpus = load_corpus(source, cache_dir)
    tokenizer = obtain_tokenizer(spec, corpus)
    return MeasuredCorpus(corpus, tokenizer, tokenize_corpus(tokenizer.tokenizer, corpus))
