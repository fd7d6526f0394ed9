"""Checkpoints from the optimizer layout: what one holds (:mod:`.manifest`, no torch), finding
and checking one to resume (:mod:`.resume`, no torch), writing and restoring (:mod:`.store`)."""
