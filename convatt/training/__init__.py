"""Training one run: the trainer, the paper's protocol and optimizer, metrics, stop requests."""
