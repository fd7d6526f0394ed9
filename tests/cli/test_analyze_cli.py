"""``hydraulis analyze``: a corpus or a lengths file → report; bad input exits 2 with one line."""

import json

import pytest

from hydraulis.artifacts.lengths import read_lengths, write_lengths
from tests.cli.helpers import hydraulis
from tests.data.conftest import write_code_corpus

REPORT = ("summary.md", "lengths.txt", "analysis.json", "length_histogram.png", "token_share.png",
          "square_share.png", "step_max.png")


@pytest.mark.slow
def test_corpus_with_a_tiny_model_vocabulary(tmp_path):
    code_corpus = write_code_corpus(tmp_path / "code.jsonl")
    result = hydraulis("analyze", "--corpus", str(code_corpus), "--vocab-size", "1024", "--cache-dir",
                       str(tmp_path / "cache"), "--token-budget", "8192", "--max-seq-len", "2048",
                       "--steps", "40", "--tail", "1024", "-o", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert "vocabulary 1024, tokenizer trained" in result.stdout and "per byte" in result.stdout
    assert "above 1024:" in result.stdout and "of Σs²" in result.stdout
    assert all((tmp_path / "r" / name).is_file() for name in REPORT)
    document = json.loads((tmp_path / "r" / "analysis.json").read_text())
    assert document["source"]["vocabulary size"] == 1024
    assert document["lengths"]["documents"] == read_lengths(tmp_path / "r" / "lengths.txt").size
    again = hydraulis("analyze", "--corpus", str(code_corpus), "--vocab-size", "1024", "--cache-dir",
                      str(tmp_path / "cache"), "--token-budget", "8192", "-o", str(tmp_path / "r2"))
    assert "tokenizer cached" in again.stdout


def test_directory_corpus_counts_undecodable_files(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def f():\n    return 1\n" * 40)
    (tmp_path / "src" / "b.py").write_bytes(b"x = '\xff'\n")
    result = hydraulis("analyze", "--corpus", str(tmp_path / "src"), "--glob", "*.py", "--vocab-size", "300",
                       "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert "1 document," in result.stdout and "1 undecodable file skipped" in result.stdout


def test_lengths_file(tmp_path):
    write_lengths(tmp_path / "l.txt", [100, 100, 100, 10000])
    result = hydraulis("analyze", "--lengths", str(tmp_path / "l.txt"), "--token-budget", "20000", "--steps", "5",
                       "-o", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert "above 8192: 25.0% of documents, 97.1% of tokens, 100.0% of Σs²" in result.stdout
    assert read_lengths(tmp_path / "r" / "lengths.txt").tolist() == [100, 100, 100, 10000]


def _file(name: str, content: bytes):
    def make(tmp_path):
        (tmp_path / name).write_bytes(content)
        return str(tmp_path / name)
    return make


@pytest.mark.parametrize("make, extra, needle", [
    (lambda t: str(t / "missing.jsonl"), [], "corpus: '/"),
    (_file("e.jsonl", b""), [], "is empty: it holds no documents"),
    (_file("u.jsonl", b'{"text": "caf\xe9"}\n'), [], "is not valid UTF-8"),
    (_file("c.jsonl", b'{"text": "x"}\n'), ["--text-field", "body"], "text_field: 'body' is not a field"),
    (_file("c.jsonl", b'{"text": "x"}\n'), ["--token-budget", "1000", "--max-seq-len", "4096"],
     "token_budget: 1000 is smaller than one sequence of max_seq_len = 4096 tokens"),
    (_file("c.jsonl", b'{"text": "x"}\n'), ["--vocab-size", "100"], "--vocab-size: '100' must be between 257 and 1048576"),
    (_file("c.jsonl", b'{"text": "x"}\n'), ["--tokenizer", "/nonexistent/tokenizer.json"], "does not exist"),
    (_file("c.jsonl", b'{"text": "x"}\n'), ["--tokenizer", "t.json", "--vocab-size", "1024"],
     "--vocab-size: 1024 applies to a trained tokenizer"),
])
def test_bad_corpus_input_exits_2_with_one_line(tmp_path, make, extra, needle):
    result = hydraulis("analyze", "--corpus", make(tmp_path), "--cache-dir", str(tmp_path / "cache"),
                       "-o", str(tmp_path / "r"), *extra)
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("extra, needle", [
    (["--lengths", "MISSING"], "does not exist or is not a file"),
    (["--lengths", "L", "--tokenizer", "t.json"], "--tokenizer: 't.json' applies to --corpus only"),
    (["--lengths", "L", "--token-budget", "50"], "token_budget: 50 is smaller than one sequence"),
])
def test_bad_lengths_input_exits_2_with_one_line(tmp_path, extra, needle):
    write_lengths(tmp_path / "l.txt", [5, 6])
    args = [str(tmp_path / "l.txt") if a == "L" else str(tmp_path / "missing.txt") if a == "MISSING" else a
            for a in extra]
    result = hydraulis("analyze", *args, "--max-seq-len", "100", "-o", str(tmp_path / "r"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert needle in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_corpus_and_lengths_are_exclusive(tmp_path):
    result = hydraulis("analyze", "--corpus", "c.jsonl", "--lengths", "l.txt", "-o", str(tmp_path))
    assert result.returncode == 2 and "not allowed with argument" in result.stderr
