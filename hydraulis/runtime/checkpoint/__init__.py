"""Checkpoints from the optimizer layout: what one holds (:mod:`hydraulis.job.manifest`, no torch),
finding and checking one to resume (:mod:`.resume`, no torch), writing and restoring
(:mod:`.store`), Hugging Face import and export."""
