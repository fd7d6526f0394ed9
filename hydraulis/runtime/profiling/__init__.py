"""The profiler's jobs on devices (torch): timing one pipeline stage of every scheme on the
runtime's own layers (:mod:`.measure`, stand-in neighbours in :mod:`.loopback`, the device's
which devices and clock in :mod:`.device`) and the runtime's reduction (:mod:`.reduction`). What they measure is
fitted into a scheme space by the pure :mod:`hydraulis.profiler`."""
