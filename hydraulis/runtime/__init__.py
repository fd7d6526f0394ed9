"""The PyTorch runtime that executes step plans (DESIGN §7)."""
