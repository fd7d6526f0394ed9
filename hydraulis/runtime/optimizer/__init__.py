"""The ZeRO-1 story in one place: canonical parameters and compute shards (:mod:`.sharding`),
who owns which element of the optimizer layout (:mod:`.placement`), one rank's fp32 master
weights and moments (:mod:`.master`), and the routes that carry gradients in and weights out
(:mod:`.routes`)."""
