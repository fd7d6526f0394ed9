"""Per-step dispatch (DESIGN §6): sequences to pipelines, pipelines' sequences to micro-batches, and the strategy with the lowest predicted time. Pure: no torch, no I/O."""
