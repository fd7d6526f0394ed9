"""``hydraulis analyze``: a corpus' or a lengths file's length distribution, its tail and what it
does to each step under a token budget; plots, a lengths file and a markdown summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from hydraulis import __version__
from hydraulis.artifacts import timestamp
from hydraulis.artifacts.lengths import read_lengths
from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath
from hydraulis.cli.output import command_line, emit, plural
from hydraulis.data.analysis import DEFAULT_STEPS, DEFAULT_TAIL_THRESHOLD, AnalysisConfig
from hydraulis.data.corpus import CorpusSource, TextUnit
from hydraulis.data.measure import measure_corpus
from hydraulis.data.tokenizer import DEFAULT_VOCAB_SIZE, TokenizerSpec
from hydraulis.io.length_report import write_report

DEFAULT_TOKEN_BUDGET = 131072
DEFAULT_MAX_SEQ_LEN = 32768
DEFAULT_CACHE = Path.home() / ".cache" / "hydraulis"


def register(commands: argparse._SubParsersAction) -> None:
    analyze = commands.add_parser(
        "analyze", help="length distribution of a corpus or lengths file: statistics, plots, lengths file",
        description="Offline: tokenize a corpus (with a byte-level BPE trained on it and cached, or a local "
                    "--tokenizer), or read a lengths file, and report its length distribution: count, "
                    "mean, percentiles, the share of documents, tokens and Σs² per length bucket and above the "
                    "tail threshold, and each step's longest sequence when steps are filled to the token budget. "
                    "Writes lengths.txt (for the planner), PNG plots, summary.md and analysis.json.")
    source = analyze.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", type=InputFile(FileKind.CORPUS),
                        help="JSONL, JSON, Parquet or text file, or a directory of source files")
    source.add_argument("--lengths", type=InputFile(FileKind.LENGTHS),
                        help="lengths file (.txt, .txt.gz or .npy), one length in tokens per line")
    analyze.add_argument("--text-field", default="text", help="field holding the documents (default text)")
    analyze.add_argument("--text-unit", choices=[u.value for u in TextUnit], default=TextUnit.LINE.value,
                         help="one document of a text file (default line)")
    analyze.add_argument("--glob", default="**/*", help="files of a directory corpus (default **/*)")
    analyze.add_argument("--tokenizer", type=InputFile(FileKind.TOKENIZER),
                         help="local tokenizer.json to use instead of training one")
    analyze.add_argument("--vocab-size", type=Bounded(limits.VOCAB_SIZE),
                         help=f"vocabulary of the byte-level BPE trained on the corpus (default {DEFAULT_VOCAB_SIZE}; "
                              "the tiny model preset needs 1024)")
    analyze.add_argument("--cache-dir", type=OutputPath(), default=DEFAULT_CACHE,
                         help="trained tokenizers and datasets' Arrow cache (default ~/.cache/hydraulis)")
    analyze.add_argument("--token-budget", type=Bounded(limits.TOKEN_BUDGET), default=DEFAULT_TOKEN_BUDGET,
                         help=f"tokens per global batch T (default {DEFAULT_TOKEN_BUDGET})")
    analyze.add_argument("--max-seq-len", type=Bounded(limits.MAX_SEQ_LEN),
                         help=f"longest sequence S; longer documents are cut (default min(T, {DEFAULT_MAX_SEQ_LEN}))")
    analyze.add_argument("--steps", type=Bounded(limits.SAMPLED_STEPS), default=DEFAULT_STEPS,
                         help=f"steps to simulate for the per-step maxima (default {DEFAULT_STEPS})")
    analyze.add_argument("--seed", type=Bounded(limits.SEED), default=0,
                         help="shuffle seed of the simulated steps (default 0)")
    analyze.add_argument("--tail", type=Bounded(limits.LENGTH), default=DEFAULT_TAIL_THRESHOLD,
                         help=f"tail threshold in tokens (default {DEFAULT_TAIL_THRESHOLD})")
    analyze.add_argument("-o", "--output", required=True, type=OutputPath(), help="report directory")
    analyze.set_defaults(run=_analyze)


def _analyze(args: argparse.Namespace) -> None:
    max_seq_len = args.max_seq_len if args.max_seq_len is not None else min(args.token_budget, DEFAULT_MAX_SEQ_LEN)
    config = AnalysisConfig(args.token_budget, max_seq_len, args.steps, args.seed, args.tail)
    if args.lengths is not None:
        for flag, value in (("--tokenizer", args.tokenizer), ("--vocab-size", args.vocab_size)):
            if value is not None:
                raise HydraulisError(flag, value, "applies to --corpus only, not to --lengths")
        lengths, source = read_lengths(args.lengths), (("lengths", args.lengths),)
    else:
        if args.tokenizer is not None and args.vocab_size is not None:
            raise HydraulisError("--vocab-size", args.vocab_size, "applies to a trained tokenizer, not to --tokenizer")
        spec = TokenizerSpec(args.tokenizer, args.vocab_size or DEFAULT_VOCAB_SIZE, Path(args.cache_dir) / "tokenizers")
        measured = measure_corpus(CorpusSource(Path(args.corpus), args.text_field, TextUnit(args.text_unit), args.glob),
                                  spec, Path(args.cache_dir) / "datasets")
        lengths, source = measured.lengths, measured.facts()
        emit(f"{args.corpus}: {plural(measured.corpus.documents, 'document')}, "
             f"{plural(measured.corpus.bytes, 'byte')}, "
             f"{plural(measured.corpus.skipped_undecodable, 'undecodable file')} skipped; "
             f"{measured.tokenized.tokens} tokens "
             f"({measured.tokenized.tokens_per_byte:.3f} per byte, vocabulary {measured.tokenizer.vocab_size}, "
             f"tokenizer {measured.tokenizer.origin})")
    analysis, files = write_report(args.output, lengths, config, source, created=timestamp(),
                                   tool_version=__version__, command=command_line())
    summary = analysis.lengths
    emit(f"{plural(summary.documents, 'document')}, mean {summary.mean:.0f} tokens, max {summary.maximum}; above "
         f"{summary.tail_threshold}: {summary.tail_document_share:.1%} of documents, "
         f"{summary.tail_token_share:.1%} of tokens, {summary.tail_square_share:.1%} of Σs²")
    emit(f"wrote {files.directory}/: {files.summary.name}, {files.lengths.name}, {files.analysis.name}, "
         + ", ".join(p.name for p in files.plots))
