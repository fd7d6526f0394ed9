"""Attention time grows with Σ s², not with the number of documents.

One packed micro-batch of 32,768 tokens runs forward and backward through the runtime's attention
(:func:`hydraulis.runtime.model.attention.packed_attention`, the kernel the CPU runtime uses),
once as 2,048 documents of 16 tokens and once as 64 documents of 512: the first has 32× fewer
score entries (2,048·16² vs 64·512²), so it must not take longer. Prints the median time of each
over ``--repeats`` runs (after one warm-up), their score entries, and as the last line::

    many_short_over_few_long=<time of 2,048 × 16 / time of 64 × 512>

    .venv/bin/python benchmarks/attention_scaling.py [--heads 4 --kv-heads 1 --head-dim 32] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hydraulis.base.types import MicroBatch
from hydraulis.cli.output import table
from hydraulis.runtime.model.attention import attention_kernel, packed_attention
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup

TOKENS = 32768
SHAPES = {"many short": (2048, 16), "few long": (64, 512)}


def measure(documents: int, length: int, args: argparse.Namespace) -> tuple[float, float]:
    """Median seconds of forward + backward, and the score entries of the causal blocks."""
    cpu = torch.device("cpu")
    micro_batch = MicroBatch(tuple(range(documents)), (length,) * documents)
    tokens = [torch.zeros(length + 1, dtype=torch.long)] * documents
    batch = pack_micro_batch(tokens, micro_batch, 1, ParallelGroup.single(), cpu, attention_kernel(cpu, torch.float32))
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(TOKENS, args.heads, args.head_dim, generator=generator, requires_grad=True)
    k, v = (torch.randn(TOKENS, args.kv_heads, args.head_dim, generator=generator, requires_grad=True)
            for _ in range(2))
    times = []
    for _ in range(args.repeats + 1):
        start = time.perf_counter()
        packed_attention(q, k, v, batch.attention).sum().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]), documents * length * (length + 1) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", type=int, default=4, help="query heads (default 4)")
    parser.add_argument("--kv-heads", type=int, default=1, help="key/value heads (default 1)")
    parser.add_argument("--head-dim", type=int, default=32, help="head size (default 32)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs, median kept (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1, as a runtime rank)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {name: measure(documents, length, args) for name, (documents, length) in SHAPES.items()}
    print(f"one micro-batch of {TOKENS} tokens, forward + backward, {args.heads} heads ({args.kv_heads} kv) of "
          f"{args.head_dim}, {args.threads} thread(s), median of {args.repeats}")
    print(table(("shape", "documents × length", "score entries", "seconds"),
                [[name, f"{documents} × {length}", results[name][1], results[name][0]]
                 for name, (documents, length) in SHAPES.items()]))
    print(f"many_short_over_few_long={results['many short'][0] / results['few long'][0]:.3f}")


if __name__ == "__main__":
    main()
