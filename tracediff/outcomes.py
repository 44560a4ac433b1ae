"""Every outcome tracediff reports, as enums that describe themselves.

One vocabulary, defined once (as hypothesis' ``Status`` and ``ExitReason`` are): what a
scenario's comparison came to (:class:`Status`), what kind of divergence it is
(:class:`Kind`), how a gate step went (:class:`Step`), and how an executor's task ended
(:class:`TaskEnd`). Each member carries its description, the style a presenter gives it
and what it means for the exit code, so that no command or report keeps its own table.

The members are ``str`` enums: a member *is* its word (``Status.IDENTICAL == "identical"``),
so JSON files, journals and stores read and write the same words as before, and a status
read back from one compares equal to the member.
"""

from __future__ import annotations

from enum import StrEnum

EXIT_OK, EXIT_FINDING = 0, 1


class Status(StrEnum):
    """What one scenario's comparison came to."""

    IDENTICAL = "identical"
    DIVERGED = "diverged"
    ERROR = "error"
    TIMEOUT = "timeout"

    @property
    def description(self) -> str:
        return _STATUS_TEXT[self]

    @property
    def finding(self) -> bool:
        """Whether this outcome is a finding (anything but identical)."""
        return self is not Status.IDENTICAL

    @property
    def exit_code(self) -> int:
        return EXIT_FINDING if self.finding else EXIT_OK

    @property
    def style(self) -> str:
        return "bold green" if self is Status.IDENTICAL else "bold red"


_STATUS_TEXT = {
    Status.IDENTICAL: "every implementation recorded the same bytes",
    Status.DIVERGED: "the implementations' records differ",
    Status.ERROR: "an implementation raised, or broke the driver's contract",
    Status.TIMEOUT: "an implementation ran past the scenario's time limit",
}


class Kind(StrEnum):
    """The kinds of divergence, from the most to the least fundamental."""

    STRUCTURE = "structure"
    DECISION = "decision"
    BOOKKEEPING = "bookkeeping"
    TYPE = "type"
    VALUE = "value"
    ROUNDING = "rounding"
    ERROR = "error"
    TIMEOUT = "timeout"

    @property
    def description(self) -> str:
        return _KIND_TEXT[self]

    @property
    def style(self) -> str:
        return _KIND_STYLE[self]


_KIND_TEXT = {
    Kind.STRUCTURE: "a record missing or extra, or different record types at one index",
    Kind.DECISION: "a different choice: the round (or probe, refresh) chosen differs",
    Kind.BOOKKEEPING: "the same choice; another recorded int, string, flag or list differs",
    Kind.TYPE: "equal values of another type (0 vs 0.0, 1 vs True), everything else equal",
    Kind.VALUE: "the same decisions; a float is wrong by far more than rounding",
    Kind.ROUNDING: "the same decisions; floats moved by a few ULPs (summation order)",
    Kind.ERROR: "an implementation raised (or broke the driver contract)",
    Kind.TIMEOUT: "an implementation hung past the scenario's time limit",
}
_KIND_STYLE = {
    Kind.DECISION: "bold red",
    Kind.BOOKKEEPING: "bold red",
    Kind.TYPE: "bold yellow",
    Kind.VALUE: "bold yellow",
    Kind.ROUNDING: "yellow",
    Kind.STRUCTURE: "bold magenta",
    Kind.ERROR: "bold red",
    Kind.TIMEOUT: "bold red",
}


class Step(StrEnum):
    """How one step of ``tracediff gate`` went."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_CONFIGURED = "not configured"
    EMPTY = "empty"

    @property
    def failed(self) -> bool:
        return self is Step.FAILED

    @property
    def skipped(self) -> bool:
        """Nothing to check in this step (reported as a skip, e.g. in JUnit XML)."""
        return self in (Step.NOT_CONFIGURED, Step.EMPTY)


class TaskEnd(StrEnum):
    """How an executor's task ended."""

    DONE = "done"  # it returned a value
    KILLED = "killed"  # past its deadline, its worker was killed
    DIED = "died"  # its worker died under it
    FAILED = "failed"  # it raised

    @property
    def description(self) -> str:
        return _TASK_TEXT[self]


_TASK_TEXT = {
    TaskEnd.DONE: "finished",
    TaskEnd.KILLED: "killed past its deadline",
    TaskEnd.DIED: "its worker process died",
    TaskEnd.FAILED: "raised",
}
