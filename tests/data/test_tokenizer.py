import json

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.data.corpus import CorpusSource, load_corpus
from hydraulis.data.tokenizer import (
    TokenizerSpec,
    cache_name,
    load_tokenizer,
    obtain_tokenizer,
    tokenize_corpus,
    train_bpe,
)
from tests.data.conftest import code_texts, write_jsonl


@pytest.fixture
def corpus(code_corpus, tmp_path):
    return load_corpus(CorpusSource(code_corpus), cache_dir=tmp_path / "cache")


def test_a_tokenizer_for_the_tiny_model_has_exactly_its_vocabulary(corpus):
    vocab = model_preset("tiny").vocab
    tokenizer = train_bpe(corpus.texts(), vocab)
    assert tokenizer.get_vocab_size() == vocab
    tokenized = tokenize_corpus(tokenizer, corpus)
    assert max(int(d.max()) for d in tokenized.documents) < vocab
    assert tokenizer.token_to_id("<|endoftext|>") == 0


def test_byte_level_round_trip_of_any_text(corpus):
    tokenizer = train_bpe(corpus.texts(), 400)
    for text in ["def f(x):\n\treturn x ** 2\n", "naïve café ☃ 日本語 \x00\r\n", "   "]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(ids) == text


def test_training_is_deterministic(corpus):
    assert train_bpe(corpus.texts(), 600).to_str() == train_bpe(corpus.texts(), 600).to_str()


def test_trained_once_then_cached_by_corpus_hash_and_vocabulary(corpus, tmp_path):
    spec = TokenizerSpec(vocab_size=500, cache_dir=tmp_path / "tok")
    first = obtain_tokenizer(spec, corpus)
    second = obtain_tokenizer(spec, corpus)
    assert (first.origin, second.origin) == ("trained", "cached")
    assert first.path == second.path == tmp_path / "tok" / cache_name(corpus.content_hash, 500)
    assert first.tokenizer.to_str() == second.tokenizer.to_str()
    assert obtain_tokenizer(TokenizerSpec(vocab_size=501, cache_dir=tmp_path / "tok"), corpus).origin == "trained"
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == sorted(
        [cache_name(corpus.content_hash, 500), cache_name(corpus.content_hash, 501)])


def test_a_local_tokenizer_json_is_loaded(corpus, tmp_path):
    train_bpe(corpus.texts(), 300).save(str(tmp_path / "tokenizer.json"))
    ready = obtain_tokenizer(TokenizerSpec(path=tmp_path / "tokenizer.json"), corpus)
    assert (ready.origin, ready.vocab_size) == ("loaded", 300)


def test_tokens_per_byte_and_lengths(corpus):
    tokenizer = train_bpe(corpus.texts(), 1024)
    tokenized = tokenize_corpus(tokenizer, corpus)
    assert tokenized.lengths.tolist() == [d.size for d in tokenized.documents]
    assert tokenized.bytes == sum(len(t.encode()) for t in code_texts()) * 2
    assert tokenized.tokens_per_byte == tokenized.tokens / tokenized.bytes
    assert 0.2 < tokenized.tokens_per_byte < 0.6


def test_documents_without_tokens_are_dropped_and_counted(tmp_path):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "word": 1}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Strip()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path = write_jsonl(tmp_path / "w.jsonl", [{"text": "word word"}, {"text": "   "}, {"text": "other"}])
    tokenized = tokenize_corpus(tokenizer, load_corpus(CorpusSource(path), cache_dir=tmp_path / "cache"))
    assert tokenized.lengths.tolist() == [2, 1] and tokenized.dropped == 1


@pytest.mark.parametrize("make, needle", [
    (lambda t: TokenizerSpec(vocab_size=256), "vocab_size: 256 must be >= 257"),
    (lambda t: load_tokenizer(t / "missing.json"), "does not exist or is not a file"),
    (lambda t: load_tokenizer(_write(t / "bad.json", json.dumps({"model": 3}))), "is not a tokenizer.json"),
])
def test_bad_tokenizers(tmp_path, make, needle):
    with pytest.raises(HydraulisError, match=needle):
        make(tmp_path)


def _write(path, text):
    path.write_text(text)
    return path
