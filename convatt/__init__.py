"""convatt: Dufter, Schmitt & Schuetze (COLING 2020) in Keras 3.

Direct position interactions, learnable temperature and convoluted attention for
self-attention networks, with the paper's PoS-tagging experiments.
"""

__version__ = "0.1.0"

__all__ = ["load_tagger", "train"]

# Imported on first use, so that `import convatt` (and the CLI's --help) does not load Keras.
_LAZY = {"train": "convatt.training.api", "load_tagger": "convatt.inference.api"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'convatt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
