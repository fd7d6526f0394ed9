"""The ZeRO-1 story on a rank: one rank's fp32 master weights and moments (:mod:`.master`) and the
routes that carry gradients in and weights out (:mod:`.routes`). Which canonical parameters and
shards exist and who owns which element of the optimizer layout is the pure layout
(:mod:`hydraulis.layout.sharding`, :mod:`hydraulis.layout.ranges`,
:mod:`hydraulis.layout.optimizer_placement`)."""
