"""Built-in block components."""
