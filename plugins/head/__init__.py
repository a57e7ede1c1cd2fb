"""Built-in head components."""
