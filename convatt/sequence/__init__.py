"""Causal sequence tasks beyond tagging, trained into the same run directories as the tagger:
Multi-Token Attention's find-the-block task (preset "toy") and a character language model
(preset "charlm"). `config.py` (the model's scale per preset), `data.py` (encoded splits and
their scores), `model.py` (a small causal transformer of convatt's `MultiHeadAttention`),
`trainer.py` (the tagger's trainer, callbacks and checkpoints with this data and model)."""
