"""Causal sequence tasks beyond tagging, trained into the same run directories as the tagger:
Multi-Token Attention's find-the-block task (preset "toy") and a character language model
(preset "charlm"). `config.py` (the model's scale per preset), `data.py` (encoded splits and
their scores), `model.py` (a small causal transformer of convatt's `MultiHeadAttention`),
`ngram.py` (the character LM's interpolated Kneser-Ney baselines). Their trainer is
`convatt.training.sequence_trainer` (the training loop's hooks with this data and model)."""
