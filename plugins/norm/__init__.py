"""Built-in norm components."""
