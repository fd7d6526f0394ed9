"""The optimizer layout on a rank: its owners' fp32 master weights and moments (:mod:`.master`), the
routes that carry gradients in and weights out (:mod:`.routes`), the bucketed asynchronous
exchange over them (:mod:`.exchange`) and the global gradient norm (:mod:`.clipping`). Which
element each owner holds is the pure :mod:`hydraulis.layout` (:mod:`~hydraulis.layout.sharding`,
:mod:`~hydraulis.layout.ranges`, :mod:`~hydraulis.layout.optimizer_placement`)."""
