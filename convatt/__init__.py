"""convatt: Dufter, Schmitt & Schuetze (COLING 2020) in Keras 3.

Direct position interactions, learnable temperature and convoluted attention for
self-attention networks, with the paper's PoS-tagging experiments.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # lazy: `import convatt` stays light; Keras loads only when a tagger is asked for
    if name == "load_tagger":
        from convatt.trained.tagger import load_tagger

        return load_tagger
    raise AttributeError(f"module 'convatt' has no attribute {name!r}")
