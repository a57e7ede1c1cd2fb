"""The `zoo` command line: list, show, build and validate archzoo models."""
