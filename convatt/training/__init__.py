"""Training one run: the trainer, its callbacks and checkpoints, stop requests."""
