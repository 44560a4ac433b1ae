"""The command group and what every command shares: error mapping, option parsing.

Exit codes (docs/errors.md): 0 all equal / all good; 1 a divergence, a scheduler error or a
timeout (the findings); 2 bad input or usage; 3 an internal error (a bug in tracediff);
130 / 143 a run stopped by SIGINT / SIGTERM (128 + the signal number, as shells report it).
Errors print one line naming the file, seed or flag and what to do; ``--debug`` shows the
traceback instead. click's own usage errors (an unknown option, a value of the wrong type)
are one line too.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import inspect
import io
import math
import os
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

import click
from rich.console import Console

from tracediff import __version__
from tracediff.errors import TracediffError, UsageError
from tracediff.project.impls import ImplSpec, load, parse_impl

EXIT_OK, EXIT_FINDING, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def exit_interrupted(signum: int) -> int:
    """The exit code of a run stopped by ``signum``: 128 + its number (130 SIGINT, 143
    SIGTERM), what a shell reports for a process the signal killed."""
    return 128 + int(signum)


WIDE = 200  # columns when the output is not a terminal: a log or a file keeps whole lines


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # Rich exits with status 1 here. The reader went away, which is no failure of the
        # command: stop writing to the pipe and let the command finish (write its files) and
        # exit with its own status.
        self.quiet = True
        silence_stdout()


def make_console(stderr: bool = False) -> Console:
    # No console markup: what is printed carries names and values from files (a profile
    # called "[/bold]" is just a name); styling is always given as styles, never as markup.
    console = _Console(stderr=stderr, highlight=False, soft_wrap=False, markup=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Rich assumes 80 columns off a terminal; a CI log would get paths cut in half.
        console.width = WIDE
    return console


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"tracediff: error: {message}", err=True)
    sys.exit(code)


def silence_stdout() -> None:
    """Point stdout at /dev/null: its reader went away (``tracediff show --jsonl | head``),
    and Python's final flush must not fail loudly on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file descriptor (a test runner's buffer): nothing to silence


@contextlib.contextmanager
def quiet_broken_pipe(code: int) -> Iterator[None]:
    """Output in the block may meet a closed pipe: then stop writing and exit with ``code``
    (what the command had already decided), quietly."""
    try:
        yield
    except BrokenPipeError:
        if not stdout_gone():
            raise
        silence_stdout()
        sys.exit(code)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _HelpGroup(click.Group):
    """A command group whose commands know -h themselves, however they are invoked (click
    caches a command's help option, so inheriting it from the group's context would make
    the help text depend on call order)."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.context_settings.setdefault("help_option_names", ["-h", "--help"])
        super().add_command(cmd, name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if (
            command is not None
            and not ctx.resilient_parsing
            and any(param.name == "executor_text" for param in command.params)
            and not {"-h", "--help"} & set(rest)
        ):
            warm_workers()
        return name, command, rest


_HelpGroup.group_class = _HelpGroup


def _model_first(args: list[str]) -> list[str]:
    """``--model NAME`` is the root's option, but reads naturally after the command too
    (``tracediff run --model kvbatch``): wherever it stands, it is moved to the front, so it
    is applied before the command is looked up. No command has an option of that name."""
    rest: list[str] = []
    chosen: list[str] = []
    items = iter(args)
    for arg in items:
        if arg == "--":
            rest.append(arg)
            rest.extend(items)
            break
        if arg == "--model":
            value = next(items, None)
            if value is None:
                raise click.UsageError("Option '--model' requires an argument (a model name)")
            chosen = [arg, value]
        elif arg.startswith("--model="):
            chosen = [arg]
        else:
            rest.append(arg)
    return chosen + rest


# The core's commands, each defined in the module tracediff.cli.NAME (imported on demand).
COMMANDS = (
    "campaign",
    "coverage",
    "diff",
    "fuzz",
    "gate",
    "golden",
    "impls",
    "init",
    "models",
    "new-model",
    "record",
    "replay",
    "run",
    "selfcheck",
    "serve",
    "show",
    "shrink",
    "upgrade",
)


class TracediffGroup(_HelpGroup):
    """Maps every failure to one line on stderr and an exit code (no traceback):

    TracediffError -> its ``exit_code``; a click usage error -> 2; OSError (a file that
    cannot be read or written) -> 2; Ctrl-C outside a run -> 130; anything else is a bug in
    tracediff -> 3. ``--debug`` re-raises instead (a traceback).
    """

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            args = _model_first(args) if parent is None else args
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            _fail_usage(exc)

    # The core's commands (COMMANDS) and the default model's own (DecisionModel.commands) are
    # listed by name and imported only when one is run or its help shown: ``import
    # tracediff.cli`` loads no command and no model. A core command of the same name wins.
    def list_commands(self, ctx: click.Context) -> list[str]:
        try:
            extra = model_commands()
        except UsageError:  # a broken default model: its commands fail when run, not --help
            extra = {}
        return sorted({*self.commands, *COMMANDS, *extra})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            # the module's decorator adds the command to this group
            importlib.import_module(f"tracediff.cli.{cmd_name.replace('-', '_')}")
        command = super().get_command(ctx, cmd_name)
        if command is None:
            target = model_commands().get(cmd_name)
            if target is not None:
                command = _load_command(target)
                self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        from tracediff.executor.call import real_interrupts

        try:
            # a real Ctrl-C raises tracediff.executor.call.Interrupted while a command runs, so that
            # the call sites of implementation code tell it from the implementation's own
            with real_interrupts():
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort):
            raise
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            if _debug(ctx):
                raise
            _fail_usage(exc)
        except click.ClickException as exc:  # e.g. FileError, whose own exit code is 1
            if _debug(ctx):
                raise
            _fail(_one_line(exc.format_message()), EXIT_USAGE)
        except TracediffError as exc:
            if _debug(ctx):
                raise
            _fail(_one_line(str(exc)), exc.exit_code)
        except SystemExit as exc:
            # tracediff's own commands end with sys.exit; one raised by a model's code (its
            # import, generator, driver...) is the model's failure, never the exit status
            _blame_model(ctx, exc)
            raise
        except KeyboardInterrupt as exc:  # a real Ctrl-C (or SIGTERM) outside a run
            from tracediff.executor.call import Interrupted

            if not isinstance(exc, Interrupted):
                _blame_model(ctx, exc)  # raised by a model's code, not by a signal
            if _debug(ctx):
                raise
            _fail("interrupted", exit_interrupted(getattr(exc, "signum", signal.SIGINT)))
        except BrokenPipeError as exc:
            if stdout_gone():
                # The reader of our output went away (| head): not an error of the command.
                silence_stdout()
                sys.exit(EXIT_OK)
            # Any other pipe (a worker's, a fork server's, a FIFO given as --json) is no
            # reason to claim success: one line, as for any file that cannot be written.
            if _debug(ctx):
                raise
            _fail(_one_line(f"{_where(exc)}{exc.strerror or exc}"), EXIT_USAGE)
        except OSError as exc:
            if _debug(ctx):
                raise
            _fail(_one_line(f"{_where(exc)}{exc.strerror or exc}{_unnamed(exc)}"), EXIT_USAGE)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 3
            _blame_model(ctx, exc)  # a model's own code: exit 2, naming it
            if _debug(ctx):
                raise
            _fail(
                _one_line(
                    f"internal error: {type(exc).__name__}: {exc} (a bug in tracediff; rerun "
                    "with --debug for the traceback and report it)"
                ),
                EXIT_INTERNAL,
            )


def _blame_model(ctx: click.Context, exc: BaseException) -> None:
    """Exit 2 naming the model, its member and the file and line, when ``exc`` came from a
    model's own code (tracediff.blame); return when it is tracediff's."""
    from tracediff.blame import model_fault

    if isinstance(exc, SystemExit) and _commands_own_exit(ctx, exc):
        return
    fault = model_fault(exc)
    if fault is None:
        return
    if _debug(ctx):
        raise exc
    _fail(_one_line(fault.message()), EXIT_USAGE)


def _commands_own_exit(ctx: click.Context, exc: SystemExit) -> bool:
    """Whether the command that ran ended itself: the exit was called in its own module (a
    model's own command, e.g. ``tracediff live``, ends with sys.exit as the core's do)."""
    import traceback

    name = ctx.invoked_subcommand
    command = (
        ctx.command.get_command(ctx, name)
        if name and isinstance(ctx.command, click.Group)
        else None
    )
    callback = getattr(command, "callback", None)
    code = getattr(inspect.unwrap(callback), "__code__", None) if callback is not None else None
    frames = traceback.extract_tb(exc.__traceback__)
    if code is None or not frames:
        return True  # no command ran: an exit before one is tracediff's own
    return bool(frames[-1].filename == code.co_filename)


def warm_workers() -> None:
    """A command that runs scenarios (it takes ``--executor``) is about to start: start the
    local executor's fork server now, so that it imports what workers need while the
    command parses its options, loads the project and generates its scenarios (a quick
    golden check's first result came about 0.2 s sooner on the 2-core VM). Best effort:
    whatever fails here fails again, and is reported, where the command meets it."""
    with contextlib.suppress(Exception):
        from tracediff.executor.local import warm_up
        from tracediff.project import current_model

        current_model()  # loaded first: its worker_modules are part of what is preloaded
        warm_up()


def model_commands() -> Mapping[str, str]:
    """The current model's own commands: name -> "module:attr" of a click command."""
    from tracediff.project import current_model

    return current_model().commands


def _load_command(target: str) -> click.Command:
    module_name, _, attr = target.partition(":")
    command = getattr(importlib.import_module(module_name), attr)
    if not isinstance(command, click.Command):
        raise UsageError(f"model command {target} is not a click command")
    return command


def _where(exc: OSError) -> str:
    return f"{exc.filename}: " if exc.filename else ""


def _unnamed(exc: OSError) -> str:
    """What to check when a write failed for want of space and the system named no file
    (every file tracediff writes is named in its errors: this is one of its temporary files,
    e.g. the shared memory of its worker processes)."""
    if exc.filename or exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return ""
    import tempfile

    return (
        f" (a temporary file of tracediff's, in {tempfile.gettempdir()} or /dev/shm: check "
        "the free space there and the file size limit, ulimit -f)"
    )


def stdout_gone() -> bool:
    """Whether this process's stdout is a pipe whose reader has gone away: the one broken
    pipe that means "stop writing" rather than a failure (poll reports POLLERR on the write
    end of a pipe with no reader)."""
    import select

    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _fd, mask in events)


def _debug(ctx: click.Context) -> bool:
    # Read when a failure is handled, not before the command runs: --debug is set by the
    # group's own callback, which runs inside invoke().
    return bool(ctx.obj and ctx.obj.get("debug"))


def _fail_usage(exc: click.UsageError) -> NoReturn:
    command = exc.ctx.command_path if exc.ctx else "tracediff"
    _fail(f"{_one_line(exc.format_message())} (see '{command} --help')", EXIT_USAGE)


def _choose_model(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    # Applied while the arguments are parsed, before the subcommand is looked up: a model's
    # own commands (``bench``) are found under the model chosen here.
    if value is not None:
        from tracediff import model as models
        from tracediff.project import MODEL_ENV

        try:
            models.get(value)  # an unknown model fails here, with the choices
        except UsageError as exc:
            raise click.BadParameter(str(exc)) from None
        # In the environment, so worker processes and every resolution see the same model.
        os.environ[MODEL_ENV] = value
    return value


@click.group(cls=TracediffGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracediff")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.option(
    "--model",
    default=None,
    metavar="NAME",
    is_eager=True,
    expose_value=False,
    callback=_choose_model,
    help="The decision model under test (tracediff models lists them; default: the "
    "configuration's [tool.tracediff] model, else specdec).",
)
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Differential trace testing: prove an optimized implementation decides as before."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# -- shared option handling -------------------------------------------------------------------
def resolve_impls(
    values: Sequence[str], check: bool, default: Sequence[str]
) -> tuple[ImplSpec, ...]:
    """The ``--impl`` values as specs, loaded once to fail fast. Without any, a command that
    compares (a ``default`` of two or more) takes the project's configured ``impls``."""
    from tracediff.cli.settings import project

    configured = project().impls if len(default) > 1 else ()
    chosen = list(values) or list(configured) or list(default)
    specs = tuple(parse_impl(v, check=check) for v in chosen)
    for spec in specs:
        load(spec)  # fail fast, with exit 2, before any worker starts
    return specs


def resolve_equivalence(mode: str, ulps: int | None) -> Any:
    from tracediff.compare.equivalence import DECISIONS, Equivalence

    if ulps is not None and mode != DECISIONS:
        raise UsageError("--ulps needs --equivalence decisions (bytes compare exactly)")
    return Equivalence(mode, ulps or 0)


def resolve_scenarios(profile_name: str | None, seeds: Sequence[int] | None) -> list[Any]:
    """The scenarios of a profile, or of the given seeds of it (``--seeds``, parsed by
    tracediff.cli.params.SeedSet)."""
    from tracediff.cli.settings import profile as default_profile
    from tracediff.project import current_model

    model = current_model()
    from tracediff.model import claim
    from tracediff.project.profiles import load_profile

    profile = load_profile(model, default_profile(profile_name))
    seeds = tuple(seeds) if seeds is not None else profile.seeds
    if not seeds:
        raise UsageError(f"profile {profile.name!r} names no seeds; pass --seeds")
    return [claim(model, model.generate(profile, seed)) for seed in seeds]


def check_output_file(path: str | None, flag: str) -> None:
    """Fail now (exit 2) if a file the command will write at its end cannot be written."""
    if path is not None and not path.strip():
        raise UsageError(f"{flag}: the path is empty; give a file name")
    if path is not None:
        from tracediff.atomic import check_target

        check_target(path, flag)


STDOUT = "-"


def emit_json(path: str, text: str) -> None:
    """Write a JSON answer where ``--json`` said (``-``: standard output)."""
    if path == STDOUT:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    from tracediff.atomic import write_text_atomic

    write_text_atomic(path, text if text.endswith("\n") else text + "\n")


def check_output_dir(path: str | None, flag: str) -> None:
    """Create a directory the command will write into, or fail now (exit 2)."""
    if path is not None and not path.strip():
        raise UsageError(f"{flag}: the path is empty; give a directory")
    if path is not None:
        from tracediff.atomic import ensure_directory

        ensure_directory(path, flag)


def resolve_executor(text: str) -> Any:
    """The parsed ``--executor`` value (exit 2 when malformed, or Dask is missing)."""
    from tracediff.executor import parse_executor

    spec = parse_executor(text)
    if spec.kind == "inline":  # the library's in-process twin: no isolation, not for users
        raise UsageError(
            "--executor inline is not offered here; use local, dask://HOST:PORT or dask-local:N"
        )
    if spec.distributed:
        from tracediff.executor.dask import load_distributed

        load_distributed(spec.text)  # the missing extra is bad input: say so before any work
    return spec


MAX_JOBS = 1024  # worker processes; far beyond any machine's cores, short of a fork bomb
MAX_SECONDS = 7 * 24 * 3600  # a time limit beyond a week is a typo (and overflows timers)
MAX_MEMORY_MB = 2**30  # 1 PiB of address space: the most RLIMIT_AS can be told in MB here
MAX_CONTEXT = 100_000  # records of context; more than any trace a person reads


def resolve_jobs(value: int | None) -> int:
    from tracediff.cli.settings import jobs
    from tracediff.running.runner import default_jobs

    value = jobs(value)
    if value is None:
        return default_jobs()
    if value < 1:
        raise UsageError(f"-j/--jobs must be at least 1, got {value}")
    if value > MAX_JOBS:
        raise UsageError(f"-j/--jobs must be at most {MAX_JOBS}, got {value}")
    return value


def check_seconds(value: float | None, flag: str) -> None:
    """Every command's time limit: a positive, finite number of seconds, at most a week."""
    if value is None:
        return
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} must be a positive number of seconds, got {value}")
    if value > MAX_SECONDS:
        raise UsageError(f"{flag} must be at most a week ({MAX_SECONDS} seconds), got {value:.6g}")


def check_memory(value: int | None, flag: str = "--memory-limit") -> None:
    """A worker's address-space limit in MB: positive, and small enough to be set."""
    if value is None:
        return
    if value <= 0:
        raise UsageError(f"{flag} must be a positive number of megabytes, got {value}")
    if value > MAX_MEMORY_MB:
        raise UsageError(
            f"{flag} must be at most {MAX_MEMORY_MB} MB (1 PiB), got {str(value)[:30]}"
        )


def check_context(value: int, flag: str = "--context") -> None:
    """A count of context records: 0 or more, within reason."""
    if value < 0:
        raise UsageError(f"{flag} must be 0 or more, got {value}")
    if value > MAX_CONTEXT:
        raise UsageError(f"{flag} must be at most {MAX_CONTEXT:,}, got {str(value)[:30]}")
