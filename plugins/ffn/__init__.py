"""Built-in ffn components."""
