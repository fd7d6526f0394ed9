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

``X`` and ``A(T)`` take turns (weights consumed as the forward builds activations, gradients
arriving as the backward frees them); a one-owner rank (:func:`one_owner`) has ``X = 0`` and,
under bf16, no main gradients of its own. Worked example, Llama-7B alone on one H200 at 4,096
tokens, full recomputation: states ``18·n`` = 112.96, ``W + g_max`` 0.31, ``A`` 3.36: 116.6 GiB.
Outside the allocator, the communicators' buffers (:func:`communicator_bytes`) come off the
device's capacity beside the runtime's fixed overhead.
"""

from __future__ import annotations

from hydraulis.base.stages import even_split
from hydraulis.base.types import OptimizerLayout, Scheme
from hydraulis.sharding.pipeline import PipelineSplit
from hydraulis.sharding.states import MAIN_GRADIENT_BYTES


def exchange_bytes(held: int, received: int, compute_bytes: int, reduce_bytes: int) -> int:
    """``X`` of the module docstring for a rank holding ``held`` elements whose buffer receives
    ``received`` gradient elements."""
    return max(held * compute_bytes, received * reduce_bytes)


def analytic_exchange_bytes(held: float, compute_bytes: int, reduce_bytes: int) -> float:
    """``X`` when only the held elements are known (the cost model): an owner receives about as
    many gradient elements as a rank holds (ZeRO over the ranks that compute)."""
    return held * max(compute_bytes, reduce_bytes)


def one_owner(layout: OptimizerLayout, pipeline: PipelineSplit, devices: int) -> bool:
    """Whether ``pipeline``, alone on ``devices`` ranks, owns under the optimizer layout exactly
    what it computes (:attr:`~hydraulis.runtime.optimizer.routes.RoutePlan.local`): then ``X = 0``
    and, under a compute dtype narrower than fp32, its main gradients are views of the optimizer's
    fp32 gradient (:func:`held_gradient_bytes`).

    Every element must have one holder (one pipeline, ``cp = 1``, ``tp = 1`` on every stage: the
    norm weights of ``tp > 1`` are held by every tp rank, owned by one) and rank ``s`` must own
    stage ``s``: the layout ``(1, 1, pp)`` and the pipeline's stages the even split
    :mod:`~hydraulis.sharding.ownership` cuts its stages by. A ``dp_o`` or ``tp_o`` above 1
    cuts some parameter between owners that one rank holds. Worked example: ``1,1,1`` on one device
    with ``(1, 1, 1)`` and ``1,1,4`` on four with ``(1, 1, 4)`` are one owner; ``1,1,4`` with
    ``(4, 1, 1)``, ``1,2,1`` or ``1,1,1x2`` are not."""
    scheme = pipeline.scheme
    return (devices == scheme.devices and scheme.cp == 1 and all(scheme.stage_tp(s) == 1 for s in range(scheme.pp))
            and (layout.dp, layout.tp, layout.pp) == (1, 1, scheme.pp)
            and tuple(pipeline.stage_layers) == even_split(sum(pipeline.stage_layers), scheme.pp))


def held_gradient_bytes(compute_bytes: int, local: bool) -> int:
    """``g`` per held element (:mod:`~hydraulis.sharding.states`): 4 bytes of fp32 gradient, 0 when
    the main gradients are views of the optimizer's fp32 gradient — one owner (:func:`one_owner`)
    under a compute dtype narrower than fp32, where every shard is one whole run of its owner's
    buffer (:meth:`~hydraulis.runtime.optimizer.routes.Route.aliases`); in fp32 the gradient
    accumulates in ``.grad``, its own 4 bytes, whoever owns it."""
    return 0 if local and compute_bytes < MAIN_GRADIENT_BYTES else MAIN_GRADIENT_BYTES


def communicator_peers(scheme: Scheme | None, stage: int, devices: int) -> int:
    """``P``, the peers a rank of ``stage`` of ``scheme`` (None: idle) on ``devices`` devices is connected to
    through its communicators: ``r(n) = min(n − 1, 2)`` for each ring over ``n`` ranks (the
    previous and the next rank; the exchange's over all ``devices``, the stage's tp group and its
    cp group) and one per neighbouring stage (the pipeline hand-offs)::

        P = r(devices) + r(tp_σ) + r(cp) + [σ > 0] + [σ < pp − 1]

    Worked example: ``1,8,2`` on 64 devices, stage 0: ``2 + 2 + 0 + 0 + 1 = 5``; one device: 0."""
    def ring(ranks: int) -> int:
        return min(ranks - 1, 2)
    if devices <= 1:
        return 0
    if scheme is None:
        return ring(devices)
    return ring(devices) + ring(scheme.stage_tp(stage)) + ring(scheme.cp) + (stage > 0) + (stage < scheme.pp - 1)


def communicator_bytes(peers: int, peer_bytes: int) -> int:
    """``N = P·β·c``: what the collective library holds outside the allocator for ``peers``
    connections, ``peer_bytes = β·c`` each (NCCL: a buffer of ``β`` = NCCL_BUFFSIZE per channel,
    ``c`` channels; ``resources/presets.json``). Worked example: 5 peers × 4 MiB × 16 = 320 MiB."""
    return peers * peer_bytes
