from collections import defaultdict

import numpy as np

from hydraulis.data.corpus import CorpusSource
from hydraulis.data.loader import LoaderConfig, TokenBudgetLoader
from hydraulis.data.measure import measure_corpus
from hydraulis.data.tokenizer import TokenizerSpec
from tests.data.conftest import code_texts


def test_corpus_to_loader_batches_decode_back_to_the_documents(code_corpus, tmp_path):
    measured = measure_corpus(CorpusSource(code_corpus), TokenizerSpec(vocab_size=400, cache_dir=tmp_path / "tok"),
                              tmp_path / "cache")
    facts = dict(measured.facts())
    assert facts["vocabulary size"] == 400 and facts["tokenizer origin"] == "trained"
    assert facts["tokens"] == measured.lengths.sum() == measured.tokenized.tokens
    loader = TokenBudgetLoader(measured.tokenized.documents, LoaderConfig(4096, 1024, seed=5))
    pieces = defaultdict(list)
    for batch in loader.batches(end_epoch=1):
        for document, tokens in zip(batch.documents.tolist(), batch.tokens):
            pieces[document].append(tokens)
    texts = code_texts()
    decoded = [measured.tokenizer.tokenizer.decode(np.concatenate(pieces[i]).tolist()) for i in range(len(texts))]
    assert decoded == texts
