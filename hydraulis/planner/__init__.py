"""Strategy proposal (DESIGN §5): from a scheme space, a cluster and a length distribution, a few heterogeneous strategies sharing one optimizer layout. Pure: no torch, no I/O."""
