"""The console script's entry point: ``tracediff = "tracediff.cli.entry:main"``.

A worker process of the local executor imports the program's main script again (that is
how ``multiprocessing`` starts workers), and with it whatever the script imports. The
script imports only this module, which imports the command line (click, rich, every
command's options) only when called: a worker, which never calls it, does without them,
and the fork server that workers are forked from need not import them first.
"""

from __future__ import annotations


def main() -> None:
    """Run the command line (tracediff.cli.app.main)."""
    from tracediff.cli.app import main as command_line

    command_line()
