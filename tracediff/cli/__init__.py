"""The command line: parse, call the core, present, map errors to exit codes.

Exit codes: 0 all equal / all good; 1 a divergence, a scheduler error or a timeout (the
findings); 2 bad input or usage. Errors print one line naming the file, seed or flag and
what to do; ``--debug`` shows the traceback instead.

Only this package (and a model's own ``commands``) imports click. One module per command,
named after it (a group, golden or campaign, keeps its subcommands), adds it to the group in
``app``; the parameter types and option bundles they share are ``params``. The default
model's own commands (``tracediff bench``, ``tracediff live`` for specdec) are added lazily,
by name (``app.TracediffGroup``).
"""

# Importing the command modules registers their commands.
from tracediff.cli import (  # noqa: F401
    campaign,
    coverage,
    diff,
    fuzz,
    gate,
    golden,
    impls,
    init,
    models,
    record,
    replay,
    run,
    selfcheck,
    show,
    shrink,
    upgrade,
)
from tracediff.cli.app import main

__all__ = ["main"]
