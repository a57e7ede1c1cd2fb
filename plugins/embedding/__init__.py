"""Built-in embedding components."""
