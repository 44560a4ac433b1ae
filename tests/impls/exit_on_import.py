"""A module that calls ``sys.exit(5)`` when it is imported: loading it must be one clear
line and exit 2, not a silent exit 5."""

import sys

sys.exit(5)
