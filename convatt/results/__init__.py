"""From finished runs to the paper's tables and figures: frames, statistics, Markdown, plots."""
