"""The command line: parse, call the core, present, map errors to exit codes.

Exit codes: 0 all equal / all good; 1 a divergence, a scheduler error or a timeout (the
findings); 2 bad input or usage. Errors print one line naming the file, seed or flag and
what to do; ``--debug`` shows the traceback instead.

Only this package (and a model's own ``commands``) imports click. One module per command,
named after it (a group, golden or campaign, keeps its subcommands), adds it to the group in
``app`` when it is imported; the parameter types and option bundles they share are
``params``. A command's module is imported when that command is run or its help shown
(``app.COMMANDS``), and so are the default model's own commands (``tracediff bench``,
``tracediff live`` for specdec): ``tracediff golden check`` loads no fuzzer, campaign or
shrinker. The package itself imports nothing: ``main`` is imported on first use, and the
console script enters through ``entry``, so that a worker process, which imports the
program's main script again, loads no click and no command.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    # ``main`` (the click group) is imported on first use, not with the package: a worker
    # imports the console script again (tracediff.cli.entry) and must not pay for click
    if name == "main":
        from tracediff.cli.app import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
