"""``python -m tracediff``."""

from tracediff.cli import main

main()
