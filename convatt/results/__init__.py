"""From finished runs to the paper's tables and figures: frames, statistics, Markdown, plots;
`scoring.py` scores tagged CoNLL-U against gold (`convatt score`, no run needed)."""
