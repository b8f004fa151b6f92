"""Using a finished run: loading it, evaluating, tagging new text, inspecting what it learned."""
