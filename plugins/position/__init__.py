"""Built-in position components."""
