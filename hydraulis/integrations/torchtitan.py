"""``BalancedTitanDataLoader``: torchtitan's training data loader contract, each DP rank fed its
cost-balanced share of every global batch (docs/integrations.md). Needs no torchtitan.

:class:`~hydraulis.integrations.torch.BalancedBatchSampler` deals each global batch of documents
to the ranks by predicted time ``c + a·s² + b·s`` and packs each share into exactly ``g``
micro-batches of at most ``C = max_tokens`` tokens (``g`` = torchtitan's gradient accumulation
steps, so one global batch is one optimizer step). Each micro-batch is one packed row, as
torchtitan's own loader builds them: a document ``t_0 … t_n`` gives inputs ``t_0 … t_{n-1}``,
labels ``t_1 … t_n`` and positions ``0 … n-1`` (its ``s = n`` tokens for the cost model). The row
holds its ``T = Σ s`` tokens (what the cost model prices), or with ``pad_rows`` all ``C``: a block
of ``pad_id``, labels ``ignore_index``, positions ``0, 1, …`` (a document of its own for the mask).
Worked example, ``C = 8``, documents ``[5, 6, 7]`` and ``[8, 9]``, padded: inputs
``5 6 8 0 0 0 0 0``, labels ``6 7 9 -100 -100 -100 -100 -100``, positions ``0 1 0 0 1 2 3 4``.
Items are ``({"input": [1, T], "positions": [1, T]}, labels [1, T])`` int64 tensors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from hydraulis.base.errors import require, require_int
from hydraulis.base.types import TimeCoefficients
from hydraulis.integrations.torch import BalancedBatchSampler

IGNORE_INDEX = -100
"""torchtitan's (and PyTorch's cross-entropy) label of a token that has no loss."""


class BalancedTitanDataLoader:
    """This rank's packed micro-batches of every global batch (module docstring), endlessly when
    ``infinite`` (the next epoch reshuffled, as torchtitan's text loader re-loops).

    ``documents[i]``: document ``i``'s token ids (a map-style sequence, read as needed);
    ``lengths[i]`` their count, read from ``documents`` when not given and checked on reading.
    ``micro_batches`` is torchtitan's ``gradient_accumulation_steps``; run torchtitan with
    ``local_batch_size = 1`` and ``seq_len = max_tokens``. ``pad_rows``: every row ``max_tokens``
    long (static shapes; the padding costs compute the plan does not see). ``state_dict`` keys
    this rank's place by ``dp_rank_<r>``, as torchtitan's loaders do, so the DCP checkpoint holds
    every rank's.
    """

    def __init__(self, documents: Sequence[Sequence[int]], *, batch_size: int, time: TimeCoefficients,
                 max_tokens: int, micro_batches: int, dp_rank: int, dp_world_size: int,
                 lengths: Sequence[int] | None = None, seed: int = 0, infinite: bool = True,
                 pad_rows: bool = False, pad_id: int = 0, ignore_index: int = IGNORE_INDEX) -> None:
        lengths = np.asarray([len(d) for d in documents] if lengths is None else lengths, dtype=np.int64).reshape(-1)
        require(lengths.size == len(documents), "lengths", int(lengths.size),
                f"must give one count per document ({len(documents)})")
        require(lengths.size == 0 or int(lengths.min()) >= 2, "lengths", int(lengths.min(initial=0)),
                "must be at least 2 tokens a document (one input, one label)")
        require_int(pad_id, "pad_id")
        require_int(ignore_index, "ignore_index")
        self.documents, self.lengths = documents, lengths
        self.infinite, self.pad_rows, self.pad_id, self.ignore_index = infinite, pad_rows, pad_id, ignore_index
        self.sampler = BalancedBatchSampler(lengths - 1, batch_size=batch_size, time=time, max_tokens=max_tokens,
                                            num_replicas=dp_world_size, rank=dp_rank, seed=seed,
                                            micro_batches=micro_batches)
        self.dp_rank, self.dp_world_size = dp_rank, dp_world_size

    def __iter__(self) -> Iterator[tuple[dict[str, Any], Any]]:
        while True:
            for micro_batch in self.sampler:
                yield self._batch(micro_batch)
            if not self.infinite:
                return
            self.sampler.set_epoch(self.sampler.epoch + 1)

    def state_dict(self) -> dict[str, Any]:
        """``{"dp_rank_<r>": {epoch, micro-batches yielded in it, seed}, "world_size": R}``."""
        return {self._key: self.sampler.state_dict(), "world_size": self.dp_world_size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume where :meth:`state_dict` was taken; an empty state (a fresh run) changes nothing."""
        if not state:
            return
        require(state.get("world_size") == self.dp_world_size, "state.world_size", state.get("world_size"),
                f"must be this loader's dp_world_size {self.dp_world_size} (resharding is not supported)")
        require(self._key in state, "state", sorted(state), f"has no entry {self._key!r} for this rank")
        self.sampler.load_state_dict(state[self._key])

    @property
    def _key(self) -> str:
        return f"dp_rank_{self.dp_rank}"

    def _batch(self, micro_batch: list[int]) -> tuple[dict[str, Any], Any]:
        """The micro-batch's documents packed into one row, as tensors."""
        import torch

        documents = []
        for i in micro_batch:
            tokens = self.documents[i]
            require(len(tokens) == self.lengths[i], f"documents[{i}]", len(tokens),
                    f"has not the {self.lengths[i]} tokens of lengths[{i}]")
            documents.append(tokens)
        width = self.sampler.max_tokens if self.pad_rows else sum(len(d) - 1 for d in documents)
        inputs, labels, positions = packed_row(documents, width, self.pad_id, self.ignore_index)
        row = [torch.from_numpy(a).unsqueeze(0) for a in (inputs, labels, positions)]
        return {"input": row[0], "positions": row[2]}, row[1]


def packed_row(documents: Sequence[Sequence[int]], max_tokens: int, pad_id: int = 0,
               ignore_index: int = IGNORE_INDEX) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(inputs, labels, positions)`` of ``max_tokens`` int64 each: the documents shifted within
    themselves, one after another, then a padding block if they leave room (module docstring)."""
    used = sum(len(d) - 1 for d in documents)
    require(used <= max_tokens, "micro-batch tokens", used, f"exceed max_tokens = {max_tokens}")
    inputs = np.full(max_tokens, pad_id, dtype=np.int64)
    labels = np.full(max_tokens, ignore_index, dtype=np.int64)
    positions = np.empty(max_tokens, dtype=np.int64)
    start = 0
    for tokens in documents:
        tokens = np.asarray(tokens, dtype=np.int64)
        end = start + tokens.size - 1
        inputs[start:end], labels[start:end] = tokens[:-1], tokens[1:]
        positions[start:end] = np.arange(tokens.size - 1)
        start = end
    positions[start:] = np.arange(max_tokens - start)
    return inputs, labels, positions
