"""``hydraulis data``: build the standard-library corpus, draw synthetic long-tailed lengths."""

from __future__ import annotations

import argparse

from hydraulis import __version__
from hydraulis.artifacts import timestamp
from hydraulis.artifacts.lengths import write_lengths
from hydraulis.base import limits
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath
from hydraulis.cli.output import command_line, emit, plural
from hydraulis.data.analysis import DEFAULT_TAIL_THRESHOLD, tail_shares
from hydraulis.data.synth import LongTail, synth_lengths
from hydraulis.io.stdlib_corpus import build_stdlib_corpus, manifest_path


def register(commands: argparse._SubParsersAction) -> None:
    data = commands.add_parser("data", help="build corpora and synthetic length distributions",
                               description="Build the standard-library corpus; draw synthetic long-tailed lengths.")
    verbs = data.add_subparsers(dest="verb", required=True, metavar="VERB")

    build = verbs.add_parser("build-stdlib", help="the CPython standard library as a JSONL corpus",
                             description="Collect every .py file of the running interpreter's standard library "
                                         "(test suites included, site-packages excluded) into a JSONL corpus "
                                         "with fields text and path, and write a manifest beside it (files, "
                                         "bytes, undecodable files skipped, content hash).")
    build.add_argument("-o", "--output", required=True, type=OutputPath(),
                       help="JSONL corpus to write, e.g. corpus.jsonl")
    build.add_argument("--root", type=InputFile(FileKind.CORPUS),
                       help="standard-library directory (default: the running interpreter's, sysconfig's stdlib path)")
    build.set_defaults(run=_build_stdlib)

    defaults = LongTail()
    synth = verbs.add_parser("synth", help="synthetic long-tailed lengths: lognormal body + Pareto tail",
                             description="Draw document lengths (tokens): with probability --tail-share from a "
                                         "Pareto tail starting at --tail-start with index --tail-alpha, else from "
                                         "a lognormal body exp(N(--body-mu, --body-sigma)); all capped at "
                                         "--max-len. See hydraulis.data.synth.")
    synth.add_argument("--docs", type=Bounded(limits.LENGTHS), required=True, help="number of documents")
    synth.add_argument("--body-mu", type=Bounded(limits.LOG_LENGTH), default=defaults.body_mu,
                       help=f"log of the body's median length (default {defaults.body_mu}: median ≈ 403)")
    synth.add_argument("--body-sigma", type=Bounded(limits.LOG_SPREAD), default=defaults.body_sigma,
                       help=f"spread of the body in log space (default {defaults.body_sigma})")
    synth.add_argument("--tail-start", type=Bounded(limits.LENGTH), default=defaults.tail_start,
                       help=f"shortest tail length x_m (default {defaults.tail_start})")
    synth.add_argument("--tail-alpha", type=Bounded(limits.TAIL_INDEX), default=defaults.tail_alpha,
                       help=f"Pareto index α; smaller is heavier (default {defaults.tail_alpha})")
    synth.add_argument("--tail-share", type=Bounded(limits.SHARE), default=defaults.tail_share,
                       help=f"probability that a document comes from the tail (default {defaults.tail_share})")
    synth.add_argument("--max-len", type=Bounded(limits.LENGTH), default=defaults.max_len,
                       help=f"cap on every length (default {defaults.max_len})")
    synth.add_argument("--seed", type=Bounded(limits.SEED), default=0, help="random seed (default 0)")
    synth.add_argument("-o", "--output", required=True, type=OutputPath(),
                       help="lengths file to write (.txt, .txt.gz or .npy)")
    synth.set_defaults(run=_synth)


def _build_stdlib(args: argparse.Namespace) -> None:
    manifest = build_stdlib_corpus(args.output, args.root, created=timestamp(), tool_version=__version__,
                                   command=command_line())
    emit(f"wrote {args.output}: {plural(manifest.files, 'file')}, {plural(manifest.bytes, 'byte')}, "
         f"{len(manifest.skipped_undecodable)} undecodable skipped (Python {manifest.python}, {manifest.root})")
    emit(f"wrote {manifest_path(args.output)}: content hash {manifest.content_hash}")


def _synth(args: argparse.Namespace) -> None:
    shape = LongTail(args.body_mu, args.body_sigma, args.tail_start, args.tail_alpha, args.tail_share, args.max_len)
    lengths = synth_lengths(args.docs, shape, args.seed)
    write_lengths(args.output, lengths)
    documents, tokens, squares = tail_shares(lengths, DEFAULT_TAIL_THRESHOLD)
    emit(f"wrote {args.output}: {plural(lengths.size, 'length')}, mean {lengths.mean():.0f}, max {lengths.max()}; "
         f"above {DEFAULT_TAIL_THRESHOLD}: {documents:.1%} of documents, {tokens:.1%} of tokens, {squares:.1%} of Σs²")
