"""Built-in attention components."""
