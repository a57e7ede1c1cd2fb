"""Built-in sharing components."""
