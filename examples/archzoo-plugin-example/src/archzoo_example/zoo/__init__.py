"""Zoo specs of the example plugin (package data)."""
