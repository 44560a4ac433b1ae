"""Output helpers the commands share: a console that keeps long lines whole, a progress
bar that shows only on a terminal, and how many rows a listing shows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tracediff.cli.app import make_console


def text_console(stderr: bool = False) -> Console:
    """The CLI's console with long lines kept whole (commands to copy, paths)."""
    console = make_console(stderr=stderr)
    console.soft_wrap = True
    return console


MAX_LISTED = 20


@contextmanager
def progress_bar(show: bool, total: int, label: str) -> Iterator[Callable[[Any], None]]:
    """A progress bar on stderr (only on a terminal); yields the per-result callback."""
    console = text_console(stderr=True)
    if not show or not console.is_terminal or total <= 1:
        yield lambda _result: None
        return
    progress = Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task(label, total=total)
        yield lambda _result: progress.advance(task)
