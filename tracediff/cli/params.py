"""The click parameter types and option bundles every command shares.

A value is checked where it is parsed, with the messages (and exit 2) the commands have
always given: a seed set (:class:`SeedSet`), a time limit (:class:`Seconds`), a file the
command writes at its end (:class:`OutputFile`: its directory must exist and accept a file,
so a run never ends in "cannot write"). The bundles declare the options that recur
(``--impl``, ``--profile``, ``--seeds``, ``--timeout``, ``--json``, ``-o/--output``,
``--executor``, ``--equivalence``) once, each command giving only its own help text, so
that command bodies only resolve the project's defaults and call the core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tracediff.cli.app import STDOUT, check_output_file, check_seconds
from tracediff.cli.settings import WORKLOAD_META
from tracediff.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:  # generic from click 8.2 on; the project supports 8.1 too
    _ParamType = click.ParamType[Any, Any]
else:
    _ParamType = click.ParamType

# A scenario's seed (--seed): what the profiles' seed sets allow (parse_seeds).
SEED = click.IntRange(0, 2**53 - 1)


def _flag(param: click.Parameter | None, fallback: str) -> str:
    """How the messages name an option: ``--timeout``, ``-o/--output``."""
    opts = getattr(param, "opts", None)
    return "/".join(opts) if opts else fallback


# -- types ------------------------------------------------------------------------------------
class SeedSet(_ParamType):
    """A seed set, "0..7,9" (tracediff.project.seeds.parse_seeds), as a tuple of seeds."""

    name = "text"  # the metavar every command's help has always shown

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        from tracediff.project.seeds import MAX_SEEDS, parse_seeds

        # parse_seeds's UsageError: one line, exit 2, naming the bad part of the set
        return parse_seeds(str(value), MAX_SEEDS if self.limit is None else self.limit)


class Counts(_ParamType):
    """Counts in a seed set's syntax ("50,100,200"), as a tuple: a bench's request counts.
    A bad one is a UsageError (exit 2) naming the option and ``example``."""

    name = "text"

    def __init__(self, example: str) -> None:
        self.example = example

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        from tracediff.project.seeds import parse_seeds

        try:
            return parse_seeds(str(value))
        except UsageError:
            flag = _flag(param, "--requests")
            raise UsageError(f"{flag} {value!r}: give counts like {self.example}") from None


class Seconds(click.types.FloatParamType):
    """A time limit: a positive, finite number of seconds, at most a week."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        check_seconds(seconds, _flag(param, "--timeout"))
        return seconds


class OutputFile(click.Path):
    """A file the command writes (atomically) at its end, checked now: its directory must
    exist and accept a new file (tracediff.atomic.check_target). With ``stdout``, ``-``
    means standard output."""

    def __init__(self, *, stdout: bool = False) -> None:
        super().__init__(dir_okay=False)
        self.stdout = stdout

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if self.stdout and value == STDOUT:
            return value
        path = super().convert(value, param, ctx)
        check_output_file(str(path), _flag(param, "--json"))
        return path


class _JsonTarget(_ParamType):
    """``--json [FILE]``: the value as given (no path checks of click's), ``-`` for standard
    output, any other file checked like every output file."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value != STDOUT:
            check_output_file(str(value), _flag(param, "--json"))
        return value


# -- option bundles ---------------------------------------------------------------------------
PROFILE_HELP = "Seed-set profile (default: the configured profile, else quick)."


def _option(*decls: str, **attrs: Any) -> Callable[[F], F]:
    option: Callable[[F], F] = click.option(*decls, **attrs)
    return option


def _checked_profile(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    if value is not None:
        from tracediff.workload import check_profile_name

        try:
            check_profile_name(value, "--profile")
        except UsageError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def profile_option(help: str = PROFILE_HELP) -> Callable[[F], F]:  # noqa: A002 - click's word
    """``--profile NAME`` (the parameter ``profile_name``)."""
    return _option("--profile", "profile_name", default=None, help=help, callback=_checked_profile)


WORKLOAD_HELP = (
    "A request trace (Mooncake or tracediff JSON lines, an Azure or BurstGPT CSV) whose "
    "windows are the scenarios: the profile's seeds pick them (docs/workloads.md)."
)


def _remember_workload(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value is not None:
        ctx.meta[WORKLOAD_META] = str(value)


def workload_option(function: F) -> F:
    """``--workload FILE``: the profile of the command (``--profile``, else the configured
    one) takes its requests from FILE's windows. Not a parameter of the command: the
    profile name every command resolves (tracediff.cli.settings.profile) carries it, so
    each command takes it without a line of its own."""
    return _option(
        "--workload",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        expose_value=False,
        callback=_remember_workload,
        metavar="FILE",
        help=WORKLOAD_HELP,
    )(function)


def seeds_option(help: str, *, limit: int | None = None) -> Callable[[F], F]:  # noqa: A002
    """``--seeds SET``, parsed (a tuple of seeds, or None: the profile's)."""
    return _option("--seeds", type=SeedSet(limit), default=None, help=help)


def impl_option(
    help: str,  # noqa: A002
    *,
    multiple: bool = True,
    default: str | None = None,
) -> Callable[[F], F]:
    """``--impl``: repeatable (the parameter ``impls``), or one (``impl``, with a default).
    The values stay names: ``--check`` and the project's configuration decide how they are
    loaded (tracediff.cli.app.resolve_impls)."""
    if multiple:
        return _option("--impl", "impls", multiple=True, help=help)
    return _option("--impl", "impl", default=default, show_default=default is not None, help=help)


def counts_option(default: str, example: str) -> Callable[[F], F]:
    """A bench's ``--requests``: the request counts of its cells (:class:`Counts`)."""
    return _option("--requests", type=Counts(example), default=default, show_default=True,
                   help="Request counts.")  # fmt: skip


def choices_option(flag: str, choices: Sequence[str], help: str) -> Callable[[F], F]:  # noqa: A002
    """A repeatable option of fixed ``choices`` (``--pressure low --pressure high``), given
    to the command as a tuple named after the flag plus "s" (``pressures``); empty when
    it is not given, the command choosing its default."""
    dest = flag.lstrip("-").replace("-", "_") + "s"
    return _option(flag, dest, multiple=True, type=click.Choice(list(choices)), help=help)


def timeout_option(help: str, name: str = "timeout_s") -> Callable[[F], F]:  # noqa: A002
    """``--timeout SECONDS``: a positive, finite number of seconds, at most a week."""
    return _option("--timeout", name, type=Seconds(), default=None, help=help)


def json_file_option(help: str, *, check: bool = True) -> Callable[[F], F]:  # noqa: A002
    """``--json FILE`` (the parameter ``json_path``): a JSON file written beside the
    command's own output. ``check=False``: the command checks it itself, later (``run``:
    the file may be inside a directory the command creates first)."""
    return _option(
        "--json",
        "json_path",
        type=OutputFile() if check else click.Path(dir_okay=False),
        default=None,
        help=help,
    )


def json_to_option(what: str) -> Callable[[F], F]:
    """``--json [FILE]`` for commands whose JSON is their whole answer: to FILE, or to
    standard output when FILE is ``-`` or left out (the one convention: ``--json FILE``)."""
    return _option(
        "--json",
        "json_path",
        type=_JsonTarget(),
        is_flag=False,
        flag_value=STDOUT,
        default=None,
        metavar="[FILE]",
        help=f"{what} as JSON, written to FILE (standard output when FILE is - or omitted).",
    )


def output_option(help: str, *, required: bool = False) -> Callable[[F], F]:  # noqa: A002
    """``-o/--output FILE`` (the parameter ``output``), checked like every output file."""
    return _option("-o", "--output", type=OutputFile(), required=required, default=None, help=help)


def equivalence_options(function: F) -> F:
    """``--equivalence`` and ``--ulps``, shared by every command that compares records."""
    function = _option(
        "--ulps",
        type=int,
        default=None,
        metavar="N",
        help="With --equivalence decisions: how many ULPs a float may differ by (default 0).",
    )(function)
    return _option(
        "--equivalence",
        type=click.Choice(["bytes", "decisions"]),
        default="bytes",
        show_default=True,
        help="bytes: records must be byte-identical. decisions: every decision field equal and "
        "floats within --ulps ULPs; reported as such, never as byte identity.",
    )(function)


EXECUTOR_HELP = (
    "Where scenarios run: local (worker processes here, -j of them), dask://HOST:PORT (a "
    "running Dask scheduler) or dask-local:N (a Dask cluster of N processes here). Dask needs "
    "the optional extra tracediff[dask]."
)


def executor_option(function: F) -> F:
    """The ``--executor`` option every command that runs scenarios takes."""
    return _option(
        "--executor",
        "executor_text",
        default="local",
        show_default=True,
        metavar="SPEC",
        help=EXECUTOR_HELP,
    )(function)
