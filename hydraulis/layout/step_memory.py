"""What a rank's step holds besides its model states and its activations (design §6.4).

A device's peak over a step, with ``S`` its states (:mod:`.states`) and ``A(T)`` its
activations (:mod:`.activations`)::

    peak = S + W + g_max + max(A(T), X)
    W      = 2·w                         the cuBLAS workspaces: one per thread that runs matrix
                                         products (the forward's, the autograd engine's device
                                         thread), ``w`` per device kind, held once allocated
    g_max  = b·max_p |p|                 one parameter's gradient in the compute dtype before the
                                         hook adds it to its fp32 main buffer (the largest held)
    X      = max(n·b, n_r·r)             the exchanges' buffers in flight: the weights propagated to
                                         the ``n`` held elements at the step's start, the gradients
                                         received for the owned ones (``n_r``, in the reduce dtype
                                         ``r``), every bucket's kept until the update (what a rank
                                         sends is freed once its stream waits for the collective)

``X`` and ``A(T)`` take turns: the propagated weights are consumed as the forward builds up the
activations, the reduced gradients arrive as the backward frees them, so the sum of both stays
below the larger (each layer frees and adds in proportion). Worked example, Llama-7B alone on
one H200 (``n = 6.74e9``, bf16, ``r = 2``, ``w = 32 MiB``): ``W = 67 MB``, ``g_max = 262 MB``
(the head), ``X = 13.5 GB`` — above the 3.6 GB of activations of 4,096 tokens under full
recomputation, so the step peaks at the end of its backward at ``148.2 + 0.07 + 0.26 + 13.5``
≈ 162 GB.
"""

from __future__ import annotations


def exchange_bytes(held: int, received: int, compute_bytes: int, reduce_bytes: int) -> int:
    """``X`` of the module docstring for a rank holding ``held`` elements whose buffer receives
    ``received`` gradient elements."""
    return max(held * compute_bytes, received * reduce_bytes)


def analytic_exchange_bytes(held: float, compute_bytes: int, reduce_bytes: int) -> float:
    """``X`` when only the held elements are known (the cost model): an owner receives about as
    many gradient elements as a rank holds (ZeRO over the ranks that compute)."""
    return held * max(compute_bytes, reduce_bytes)
