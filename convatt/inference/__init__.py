"""Inference with a finished run: loading it (`loading.py`), evaluating it, tagging new text
(`tagging.py`; `api.py`: the Python API, `convatt.load_tagger`), inspecting what it learned,
generating text with a causal run."""
