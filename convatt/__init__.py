"""convatt: Dufter, Schmitt & Schuetze (COLING 2020) in Keras 3.

Direct position interactions, learnable temperature and convoluted attention for
self-attention networks, with the paper's PoS-tagging experiments.
"""

__version__ = "0.1.0"
