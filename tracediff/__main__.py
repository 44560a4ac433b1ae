"""``python -m tracediff``: the console script's entry (tracediff.cli.entry)."""

from tracediff.cli.entry import main

main()
