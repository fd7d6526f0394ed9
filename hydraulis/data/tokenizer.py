"""Offline tokenizer: a byte-level BPE trained locally on the corpus, or any local
``tokenizer.json``.

Byte-level BPE (GPT-2's scheme: the text is split by the GPT-2 pre-tokenisation pattern, each
piece mapped to bytes, and merges learned from pair counts) covers every input without an
unknown token. Training is deterministic for the same documents in the same order and the same
vocabulary size, so a trained tokenizer is cached under the corpus' content hash and the
vocabulary size (``bpe-v{V}-{hash}.json``) and reused. The vocabulary holds the 256 bytes, one
special token ``<|endoftext|>`` (id 0, never added to documents) and the learned merges, at
most ``V`` entries in all — ``V = 1024`` for the ``tiny`` model preset, 32000 for the LLaMA
presets (Touvron et al. 2023, arXiv:2302.13971).

Tokens per byte ``= Σ tokens / Σ UTF-8 bytes`` over the non-empty documents. Worked example:
Python source tokenised with a 32000-entry BPE trained on the standard library gives about
0.25 tokens per byte (≈ 4 bytes per token); with 1024 entries about 0.39.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.files import atomic_path
from hydraulis.data.corpus import Corpus

log = logging.getLogger(__name__)

DEFAULT_VOCAB_SIZE = 32000
END_OF_TEXT = "<|endoftext|>"
MIN_VOCAB_SIZE = 256 + 1
RECIPE = "bpe"
ENCODE_BATCH = 512


@dataclass(frozen=True)
class TokenizerSpec:
    """Load ``path`` if given; otherwise train a byte-level BPE of ``vocab_size`` entries on the
    corpus, cached in ``cache_dir`` (no cache when ``None``)."""

    path: Path | None = None
    vocab_size: int = DEFAULT_VOCAB_SIZE
    cache_dir: Path | None = None

    def __post_init__(self) -> None:
        require_int(self.vocab_size, "vocab_size", minimum=MIN_VOCAB_SIZE)
        if self.path is not None:
            object.__setattr__(self, "path", Path(self.path))
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))


@dataclass(frozen=True)
class ReadyTokenizer:
    """A tokenizer and where it came from: ``origin`` is ``loaded``, ``cached`` or ``trained``."""

    tokenizer: Any = field(repr=False)
    path: Path | None
    origin: str

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()


@dataclass(frozen=True)
class TokenizedCorpus:
    """Token ids of each document (``int32``), their lengths, the corpus' bytes; ``dropped``
    counts non-empty documents the tokenizer turned into no token at all (e.g. whitespace under
    a tokenizer that strips it; never with the byte-level BPE)."""

    documents: tuple[np.ndarray, ...] = field(repr=False)
    lengths: np.ndarray = field(repr=False)
    bytes: int
    dropped: int = 0

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())

    @property
    def tokens_per_byte(self) -> float:
        return self.tokens / self.bytes


def obtain_tokenizer(spec: TokenizerSpec, corpus: Corpus) -> ReadyTokenizer:
    """The tokenizer ``spec`` asks for: loaded from ``spec.path``, else from the cache, else
    trained on ``corpus`` (and cached)."""
    if spec.path is not None:
        return ReadyTokenizer(load_tokenizer(spec.path), spec.path, "loaded")
    cached = None if spec.cache_dir is None else spec.cache_dir / cache_name(corpus.content_hash, spec.vocab_size)
    if cached is not None and cached.is_file():
        log.info("tokenizer from cache %s", cached)
        return ReadyTokenizer(load_tokenizer(cached), cached, "cached")
    tokenizer = train_bpe(corpus.texts(), spec.vocab_size, corpus.documents - corpus.empty)
    if cached is not None:
        _save_atomically(tokenizer, cached)
    return ReadyTokenizer(tokenizer, cached, "trained")


def cache_name(content_hash: str, vocab_size: int) -> str:
    """``bpe-v1024-3f2a…(16 hex digits).json``."""
    return f"{RECIPE}-v{vocab_size}-{content_hash.removeprefix('sha256:')[:16]}.json"


def train_bpe(texts: Iterable[list[str]], vocab_size: int, documents: int | None = None) -> Any:
    """A byte-level BPE with at most ``vocab_size`` entries trained on batches of ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    require_int(vocab_size, "vocab_size", minimum=MIN_VOCAB_SIZE)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[END_OF_TEXT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    log.info("training a byte-level BPE of %d entries", vocab_size)
    tokenizer.train_from_iterator(texts, trainer, length=documents)
    return tokenizer


def load_tokenizer(path: str | Path) -> Any:
    """A ``tokenizers`` tokenizer from a local ``tokenizer.json``."""
    from tokenizers import Tokenizer

    path = Path(path)
    require(path.is_file(), "tokenizer", str(path), "does not exist or is not a file")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception for unreadable files
        raise HydraulisError("tokenizer", str(path), f"is not a tokenizer.json ({error})") from None


def tokenize_corpus(tokenizer: Any, corpus: Corpus) -> TokenizedCorpus:
    """Token ids of every non-empty document of ``corpus``, in corpus order (no special tokens)."""
    documents, dropped = [], 0
    batches = math.ceil(corpus.documents / ENCODE_BATCH)
    for texts in tqdm(corpus.texts(ENCODE_BATCH), total=batches, desc="tokenizing", unit="batch", disable=None):
        for encoding in tokenizer.encode_batch_fast(texts, add_special_tokens=False):
            if encoding.ids:
                documents.append(np.asarray(encoding.ids, dtype=np.int32))
            else:
                dropped += 1
    require(bool(documents), "corpus", str(corpus.source.path), "has no document that the tokenizer turns into tokens")
    lengths = np.fromiter((d.size for d in documents), dtype=np.int64, count=len(documents))
    return TokenizedCorpus(tuple(documents), lengths, corpus.bytes, dropped)


def _save_atomically(tokenizer: Any, path: Path) -> None:
    """Write beside ``path``, then rename (:func:`~hydraulis.base.files.atomic_path`): a concurrent
    reader never sees half a file."""
    with atomic_path(path) as temporary:
        tokenizer.save(str(temporary))
    log.info("tokenizer cached at %s", path)
