"""Initial weights from a Hugging Face Llama directory (``hydraulis train --init-from DIR``).

Every rank fills its own buffer of the optimizer layout (:mod:`..optimizer.placement`) and reads
nothing else: for each region of a parameter it owns (an interval of a tensor-parallel slice,
:mod:`..optimizer.ranges`), it reads the rows that hold it, of the slice's columns, through
safetensors' lazy slicing (``get_slice(name)[r₀:r₁, c₀:c₁]``, memory-mapped, so only those
bytes are read) and converts them to fp32 — exactly, from F32, BF16 or F16. The block exceeds
the region by at most a partial row at either end: a rank reads ≈ ``P/(dp_o·tp_o·pp_o)`` values
whatever the model's size. Worked example, ``tiny``'s ``layers.0.mlp.down.weight`` (64 × 176,
split by columns) under ``tp_o = 2``: tp rank 1 owns columns 88–175 of every row; a region of
positions 1,000–2,999 of that slice (88 per row) lies in rows 11–34, so the rank reads the
24 × 88 block ``[11:35, 88:176]``, 2,112 values for the 2,000 it owns.

Optimizer moments start at zero and the step count at 0, as for weights drawn from the seed.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack

import torch

from hydraulis.runtime.checkpoint.hf_directory import HfDirectory
from hydraulis.runtime.optimizer.master import OptimizerShard
from hydraulis.sharding.ranges import Region, grid

log = logging.getLogger(__name__)


@torch.no_grad()
def load_hf_weights(directory: HfDirectory, shard: OptimizerShard) -> None:
    """Fill ``shard``'s master weights with ``directory``'s values of the elements it owns."""
    from safetensors import safe_open

    with ExitStack() as stack:
        handles = {}
        for region in shard.regions:
            tensor = directory.tensors[region.spec.name]
            if tensor.file not in handles:
                handles[tensor.file] = stack.enter_context(safe_open(str(directory.folder / tensor.file),
                                                                     framework="pt"))
            values = _read_region(handles[tensor.file].get_slice(tensor.name), region)
            shard.master[region.offset + region.lo:region.offset + region.hi].copy_(values)
    shard.written()
    log.debug("rank %d read %d weights from %s", shard.rank, shard.master.numel(), directory.folder)


def _read_region(tensor, region: Region) -> torch.Tensor:
    """The elements of ``region`` (positions ``[lo, hi)`` of a tp slice flattened row-major,
    :mod:`..optimizer.ranges`) from a lazily sliced tensor, in fp32: the rows that hold them,
    of the slice's columns."""
    _, columns, dim = grid(region.spec)
    if len(region.spec.shape) == 1:
        return tensor[region.lo:region.hi].to(torch.float32)
    width = columns if dim == 0 else region.length
    first, last = region.lo // width, (region.hi - 1) // width + 1
    if dim == 0:
        block = tensor[region.start + first:region.start + last]
    else:
        block = tensor[first:last, region.start:region.stop]
    return block.to(torch.float32).reshape(-1)[region.lo - first * width:region.hi - first * width]
