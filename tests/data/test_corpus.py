import pandas as pd
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.data.corpus import CorpusFormat, CorpusSource, TextUnit, load_corpus
from tests.data.conftest import write_jsonl


def load(tmp_path, path, **options):
    return load_corpus(CorpusSource(path, **options), cache_dir=tmp_path / "cache")


def texts(corpus):
    return [t for batch in corpus.texts(batch_size=2) for t in batch]


def test_jsonl_with_empty_documents_counted_and_skipped(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"text": "héllo"}, {"text": ""}, {"text": "world"}, {"text": "!"}])
    corpus = load(tmp_path, path)
    assert corpus.source.format is CorpusFormat.JSON
    assert (corpus.documents, corpus.empty, corpus.bytes, corpus.skipped_undecodable) == (4, 1, 12, 0)
    assert texts(corpus) == ["héllo", "world", "!"]


def test_parquet_with_another_text_field(tmp_path):
    pd.DataFrame({"content": ["def f(): pass", "x = 1"], "stars": [3, 4]}).to_parquet(tmp_path / "c.parquet")
    corpus = load(tmp_path, tmp_path / "c.parquet", text_field="content")
    assert texts(corpus) == ["def f(): pass", "x = 1"]


@pytest.mark.parametrize("unit, expected", [
    (TextUnit.LINE, ["a b", "c d"]),
    (TextUnit.PARAGRAPH, ["a b", "c d\n"]),
    (TextUnit.DOCUMENT, ["a b\n\nc d\n"]),
])
def test_plain_text_units(tmp_path, unit, expected):
    (tmp_path / "c.txt").write_text("a b\n\nc d\n")
    assert texts(load(tmp_path, tmp_path / "c.txt", text_unit=unit)) == expected


def test_directory_skips_and_counts_undecodable_files(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("a = 1\n")
    (tmp_path / "src" / "bad.py").write_bytes(b"\xff\xfe")
    corpus = load(tmp_path, tmp_path / "src", pattern="*.py")
    assert corpus.source.format is CorpusFormat.DIRECTORY
    assert (corpus.documents, corpus.skipped_undecodable) == (1, 1)
    assert texts(corpus) == ["a = 1\n"]


def test_same_texts_same_hash_whatever_the_format(tmp_path):
    rows = ["first doc", "second\ndoc"]
    jsonl = load(tmp_path, write_jsonl(tmp_path / "c.jsonl", [{"text": t} for t in rows]))
    pd.DataFrame({"text": rows}).to_parquet(tmp_path / "c.parquet")
    assert load(tmp_path, tmp_path / "c.parquet").content_hash == jsonl.content_hash
    other = load(tmp_path, write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in reversed(rows)]))
    assert other.content_hash != jsonl.content_hash


def _bytes_file(name: str, content: bytes):
    def make(tmp_path):
        (tmp_path / name).write_bytes(content)
        return tmp_path / name
    return make


@pytest.mark.parametrize("make, options, needle", [
    (lambda t: t / "missing.jsonl", {}, "does not exist"),
    (_bytes_file("e.jsonl", b""), {}, "is empty: it holds no documents"),
    (_bytes_file("e.jsonl", b'{"text": ""}\n{"text": ""}\n'), {}, r"holds only empty documents \(2\)"),
    (_bytes_file("u.jsonl", b'{"text": "ok"}\n{"text": "caf\xe9"}\n'), {}, r"u.jsonl\[1\].text: .* is not valid UTF-8"),
    (_bytes_file("u.txt", b"fine\ncaf\xe9\n"), {}, "is not valid UTF-8"),
    (_bytes_file("c.jsonl", b'{"body": "x"}\n'), {}, r"text_field: 'text' is not a field of .*c.jsonl; its fields: body"),
    (_bytes_file("c.jsonl", b'{"text": "x"}\n'), {"text_field": "content"}, "'content' is not a field"),
    (_bytes_file("n.jsonl", b'{"text": "x"}\n{"text": 3}\n'), {}, "not text: every value must be a string"),
    (_bytes_file("n.jsonl", b'{"text": "x"}\n{"text": null}\n'), {}, r"n.jsonl\[1\].text: None is null"),
    (_bytes_file("b.jsonl", b'{"text": "x"}\n{oops\n'), {}, "cannot be read as json"),
    (_bytes_file("b.parquet", b"PAR1 not parquet"), {}, "cannot be read as parquet"),
    (_bytes_file("c.csv", b"text\nx\n"), {}, "has an unsupported suffix"),
])
def test_bad_corpora(tmp_path, make, options, needle):
    with pytest.raises(HydraulisError, match=needle):
        load(tmp_path, make(tmp_path), **options)


def test_source_checks_its_fields():
    with pytest.raises(HydraulisError, match="text_field: '' must be a non-empty field name"):
        CorpusSource("c.jsonl", text_field="")
    with pytest.raises(HydraulisError, match="text_unit: 'word' must be one of line, paragraph, document"):
        CorpusSource("c.txt", text_unit="word")
