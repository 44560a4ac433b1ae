"""The console script's entry point: ``tracediff = "tracediff.cli.entry:main"``.

A worker process of the local executor imports the program's main script again (that is
how ``multiprocessing`` starts workers), and with it whatever the script imports. The
script imports only this module, which imports the command line (click, rich, every
command's options) only when called: a worker, which never calls it, does without them,
and the fork server that workers are forked from need not import them first. ``python -m
tracediff`` enters here too.
"""

from __future__ import annotations


def main() -> None:
    """Run the command line (tracediff.cli.app.main); a plain ``tracediff serve [--model M]
    IMPL`` starts its server without it (tracediff.process.server.quick_serve: a server is
    started per worker and implementation, and click, rich and the commands would be most
    of its start-up)."""
    import sys

    if "serve" in sys.argv[1:]:
        from tracediff.process.server import quick_serve

        quick_serve(sys.argv[1:])  # returns when it is not one, or to report a failure
    from tracediff.cli.app import main as command_line

    command_line()
