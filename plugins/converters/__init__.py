"""Built-in Hugging Face converters, one file per model_type."""
