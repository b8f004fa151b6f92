"""The tagger: its graph, the named variants and presets, batched predictions."""
