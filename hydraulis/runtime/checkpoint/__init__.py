"""Checkpoints from the optimizer layout: what one holds (:mod:`hydraulis.job.manifest`, no torch),
finding and checking one to resume (:mod:`.resume`, no torch), writing and restoring (:mod:`.store`)
in a background thread (:mod:`.writer`), random states as JSON (:mod:`.random_state`), Hugging Face
directories in and out (:mod:`.hf_directory`, :mod:`.hf_import`, :mod:`.hf_export`,
:mod:`.llama_mapping`)."""
