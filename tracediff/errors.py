"""The exceptions tracediff raises, and the exit code each one maps to.

    TracediffError                 base; ``exit_code`` 2 unless a subclass says otherwise
    ├── UsageError                 a flag, seed set or argument that cannot work
    ├── ProfileError               a profile that is missing or malformed (file and line)
    ├── ImplementationError        an ``--impl`` spec that cannot be loaded
    ├── ScenarioError              a scenario that fails validation
    ├── WorkloadError              a request trace (``--workload``) that cannot be read (file
    │                              and line)
    ├── TraceFormatError           a trace (or report, manifest) that cannot be read
    ├── OutputError                a file or directory tracediff must write cannot be
    │                              written (missing parent, read-only, a directory)
    ├── JournalError               a ``--resume`` journal of another run, in use, or corrupt
    ├── LiveUnavailable            the live engine cannot start: torch (the ``live`` extra) is
    │                              not installed, or ``--device cuda`` finds no GPU
    ├── SchedulerFault             an implementation raised or broke the driver
    │                              contract while running: a *finding*, exit code 1
    ├── ImplementationFailed       (tracediff.executor.call) implementation code raised in a command
    │                              that runs it in this process: a finding, exit code 1
    ├── ModelFailed                a model's driver yielded a record that breaks the trace
    │                              conventions: exit code 2, naming the model and file:line
    └── HarnessFailure             tracediff's own machinery failed (worker processes cannot
        ├── WorkerStartError       start, the Dask cluster was lost): exit code 3, and
        └── ExecutorLost           nothing is concluded about the implementation

Every message names the thing at fault (file, seed, flag) and says what to do. docs/errors.md
lists every exit code and message.
"""

from __future__ import annotations

# The words for a JSON or TOML file whose parser ran out of stack: no tracediff file nests so.
NESTING = "it nests values deeper than any tracediff file does"


class TracediffError(Exception):
    """Base class; the CLI prints ``str(err)`` on one line and exits with ``exit_code``."""

    exit_code = 2


class UsageError(TracediffError):
    """Bad command-line input: an unknown name, an impossible combination of flags."""


class ProfileError(TracediffError):
    """A profile TOML file that is missing, malformed, or names unknown parameters."""


class ImplementationError(TracediffError):
    """An implementation spec (built-in name, ``module:attr`` or command) that cannot load."""


class ScenarioError(TracediffError):
    """A scenario that fails validation (from a file, a trace header or a shrink step)."""


class WorkloadError(TracediffError):
    """A request trace (a workload: Mooncake, Azure, BurstGPT or tracediff JSON lines) that
    cannot be read: the message starts with ``file:line``."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")
        self.path = path
        self.line = line
        self.message = message


class TraceFormatError(TracediffError):
    """A trace file that is truncated, corrupt, of another version or hostile.

    ``offset`` is the byte offset of the frame that failed and ``record`` its index among
    the frames (header = 0), when known.
    """

    def __init__(
        self, path: str, message: str, *, offset: int | None = None, record: int | None = None
    ) -> None:
        where = []
        if offset is not None:
            where.append(f"byte {offset}")
        if record is not None:
            where.append(f"record {record}")
        loc = f" at {', '.join(where)}" if where else ""
        super().__init__(f"{path}{loc}: {message}")
        self.path = path
        self.problem = message  # what is wrong, without the file and place
        self.offset = offset
        self.record = record


class OutputError(TracediffError):
    """A file or directory tracediff must write that cannot be written; checked before a run
    starts where possible, so that a long run does not fail at its very end."""


class JournalError(TracediffError):
    """A ``--resume`` journal that belongs to another run, is locked by a running one, or is
    damaged anywhere but in its last line (a torn last line is a crash's, and is ignored)."""


class LiveUnavailable(TracediffError):
    """``tracediff live`` cannot run here: torch is missing (the message names the extra to
    install) or the device asked for is absent."""


class SchedulerFault(TracediffError):
    """An implementation raised, returned a malformed plan or hung: reported as a finding."""

    exit_code = 1


class ModelFailed(TracediffError):
    """A model's own code did something wrong that raised nothing (its driver yielded a
    record that breaks the trace conventions): the model's to fix, exit 2, the message
    naming the model, its member and the file and line (tracediff.blame.ModelFault)."""


class ConfigError(TracediffError):
    """A ``[tool.tracediff]`` table that is malformed or names a path that does not exist."""


class HarnessFailure(TracediffError):
    """tracediff's own machinery failed, not the implementation nor the input: nothing is
    concluded about any scenario it was running (exit code 3)."""

    exit_code = 3


class WorkerStartError(HarnessFailure):
    """A worker process cannot be started, even after restarting the fork server."""


class ExecutorLost(HarnessFailure):
    """The executor's cluster went away mid-run (the Dask scheduler, the client's connection):
    an interruption; the scenarios in flight were not recorded and a resumed run reruns them."""
