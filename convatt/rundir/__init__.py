"""The run directory: its schema (config.json, result.json, file names), durable writes,
fingerprints, reading a run back."""
