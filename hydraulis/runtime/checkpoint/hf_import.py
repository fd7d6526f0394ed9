"""Initial weights from a Hugging Face Llama directory (``hydraulis train --init-from DIR``).

Every rank fills its own buffer of the optimizer layout (:mod:`..optimizer.placement`) and reads
nothing else: for each run of parameter elements it owns, it reads the smallest block of rows
and columns that holds them through safetensors' lazy slicing (``get_slice(name)[r₀:r₁, c₀:c₁]``,
memory-mapped, so only those bytes are read) and converts them to fp32 — exactly, from F32,
BF16 or F16. A run is a contiguous piece of a tensor-parallel slice, so its block exceeds the
run by at most a partial row at either end: a rank reads ≈ ``P/(dp_o·tp_o·pp_o)`` values
whatever the model's size. Worked example, ``tiny``'s ``layers.0.mlp.down.weight`` (64 × 176,
split by columns) under ``tp_o = 2``: tp rank 1 owns columns 88–175 of every row; a run of
elements 1,000–2,999 of that slice (88 per row) lies in rows 11–34, so the rank reads the
24 × 88 block ``[11:35, 88:176]``, 2,112 values for the 2,000 it owns.

Optimizer moments start at zero and the step count at 0, as for weights drawn from the seed.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack

import numpy as np
import torch

from hydraulis.runtime.checkpoint.hf_directory import HfDirectory
from hydraulis.runtime.optimizer.master import OptimizerShard

log = logging.getLogger(__name__)


@torch.no_grad()
def load_hf_weights(directory: HfDirectory, shard: OptimizerShard) -> None:
    """Fill ``shard``'s master weights with ``directory``'s values of the elements it owns."""
    with ExitStack() as stack:
        from safetensors import safe_open

        handles = {}
        for run in shard.runs:
            tensor = directory.tensors[run.spec.name]
            if tensor.file not in handles:
                handles[tensor.file] = stack.enter_context(safe_open(str(directory.folder / tensor.file),
                                                                     framework="pt"))
            values = _read_elements(handles[tensor.file].get_slice(tensor.name), run.spec.shape, run.indices)
            shard.master[run.offset:run.offset + run.indices.size].copy_(values)
    log.debug("rank %d read %d weights from %s", shard.rank, shard.master.numel(), directory.folder)


def _read_elements(tensor, shape: tuple[int, ...], indices: np.ndarray) -> torch.Tensor:
    """Elements ``indices`` (canonical flat, row-major) of a lazily sliced tensor of ``shape``, fp32."""
    if len(shape) == 1:
        low, high = int(indices.min()), int(indices.max()) + 1
        return tensor[low:high].to(torch.float32)[torch.from_numpy(indices - low)]
    rows, columns = np.divmod(indices, shape[1])
    (r0, r1), (c0, c1) = (int(rows.min()), int(rows.max()) + 1), (int(columns.min()), int(columns.max()) + 1)
    block = tensor[r0:r1, c0:c1].to(torch.float32)
    return block[torch.from_numpy(rows - r0), torch.from_numpy(columns - c0)]
