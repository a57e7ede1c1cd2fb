"""`python -m archzoo.cli`: the same as the `zoo` command."""

from .main import main

main()
