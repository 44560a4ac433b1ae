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
shrinker, and neither does each worker process, which imports the command line again.
"""

from tracediff.cli.app import main

__all__ = ["main"]
