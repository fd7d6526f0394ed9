"""The optimizer layout on a rank: its owners' fp32 master weights and moments (:mod:`.master`), the
routes that carry gradients in and weights out (:mod:`.routes`), the bucketed asynchronous
exchange over them (:mod:`.exchange`) and the global gradient norm (:mod:`.clipping`). Which
element each owner holds is the pure :mod:`hydraulis.sharding` (:mod:`~hydraulis.sharding.parameters`,
:mod:`~hydraulis.sharding.ranges`, :mod:`~hydraulis.sharding.ownership`)."""
