"""The model seam: what a decision engine gives tracediff so that every command can test it.

tracediff's core (running, tracing, comparing, searching, golden digests, the gate, the
executors, campaigns, reports and the command line) knows nothing about any one decision
engine. A *model* is the engine's side of the contract: how its scenarios are made, read
and shrunk, how an implementation is driven through one, what its records may hold and how
they read, which rule clauses coverage counts. The speculative-decoding scheduler
(``specdec``) is the first model; a user adds one with an entry point in the group
``tracediff.models`` naming an object that satisfies :class:`DecisionModel`
(docs/models.md walks through a small one)::

    [project.entry-points."tracediff.models"]
    toy = "mypkg.toymodel:MODEL"

Conventions every model keeps, because the core reads records without knowing them:

* a record is a ``dict`` of plain msgpack values with its type under ``"t"``, first; the
  first record a driver yields is the header (no ``"t"``), whose ``"scenario"`` is the
  scenario's ``to_dict()``;
* a *decision* record has ``t == "plan"`` and ``plan``, its 1-based number: the core counts,
  times and pins failures to plans;
* an implementation is a factory called with a private copy of the scenario; the object it
  returns has the model's driver interface (:attr:`DecisionModel.methods`), of which
  :attr:`DecisionModel.decide` returns the decision.

The seam is the only way in: the layering test (tests/test_layering.py) fails when a core
module imports a model, and a model may import from the core only its public modules.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tracediff.draws import Draws as Draws  # a generator's draw source (models import it here)
from tracediff.errors import UsageError

ENTRY_POINT_GROUP = "tracediff.models"
DEFAULT_MODEL = "specdec"
# The built-in model by target, so that a source checkout that was never installed (no
# entry points) still finds it; read as a string, never imported here.
BUILTIN_MODELS: Mapping[str, str] = {"specdec": "tracediff.models.specdec.model:MODEL"}
DECISION = "plan"  # the record type of a decision, in every model

Record = dict[str, Any]


class Encoded(dict[str, Any]):
    """A decision record that came with its bytes: an implementation in another process
    sent it encoded, and ``payload`` is that encoding, which a recording digests instead of
    encoding the record again. Those bytes are canonical only if the implementation encodes
    as tracediff does, so they are asked for (``keep_decision_bytes()``, see
    :func:`tracediff.running.record.keep_decision_bytes`) only where the digest is checked
    against a known good one: a golden check's first pass, whose mismatch runs the scenario
    again with every record decoded, checked and encoded by tracediff. Its fields may be
    only those that the model's driver and the recording read (specdec's adapter decodes
    ``t``, ``plan`` and ``round``): ``payload`` holds the whole record."""

    __slots__ = ("payload",)

    def __init__(self, record: Record, payload: bytes) -> None:
        super().__init__(record)
        self.payload = payload


@runtime_checkable
class Scenario(Protocol):
    """What the core needs of any model's scenario: where it came from, a one-line summary
    of what it exercises, and its plain form (stored in traces, journals, the corpus)."""

    @property
    def profile(self) -> str: ...

    @property
    def seed(self) -> int: ...

    def features(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class Profile(Protocol):
    """A named set of seeds and whatever the model's generator reads."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def seeds(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class Clause:
    """One condition of one rule of the model's spec, counted by coverage when it decides."""

    name: str
    rule: str
    meaning: str
    proof: str = ""  # why the clause cannot decide where a profile never reaches it


class DecisionModel(Protocol):
    """A decision engine, as tracediff sees it. Methods take and return the model's own
    scenario and profile objects; the core passes them through untouched."""

    name: str  # the registry name: ``--model NAME``, ``[tool.tracediff] model``
    title: str  # one line for listings
    methods: tuple[str, ...]  # the driver interface an implementation offers
    decide: str  # the method among them that returns a decision record
    builtin_impls: Mapping[str, str]  # name -> "module:attr" (lazy)
    checked_impls: Mapping[str, str]  # ``--check``: a built-in's check-mode twin
    default_impls: tuple[str, ...]  # what runs when nothing is configured (baseline first)
    choice_fields: Mapping[str, frozenset[str]]  # per record type, the fields that hold a choice

    # -- scenarios -------------------------------------------------------------------
    def scenario_from_dict(self, data: Any) -> Any:
        """The scenario ``to_dict`` gave; ScenarioError (one line) for anything else."""

    def load_profile(self, name: str) -> Any:
        """A profile by name or .toml path; UsageError/ProfileError naming the choices."""

    def profile_names(self) -> list[str]:
        """Every profile name this model can load."""

    def generate(self, profile: Any, seed: int) -> Any:
        """The scenario of one seed: a pure function of (profile, seed)."""

    def private_copy(self, scenario: Any) -> Any:
        """A copy sharing no mutable object with ``scenario`` (an implementation may change
        the one it is given)."""

    size_unit: str  # what ``size`` counts, one of them: "request", "job"

    def size(self, scenario: Any) -> int:
        """How big a scenario is (its requests, items, ...): larger ones are started first,
        and listings show it."""

    def relabel(self, scenario: Any, profile: str) -> Any:
        """The same scenario under another profile name (``regression:quick``)."""

    def data_dir(self, kind: str) -> Path | None:
        """The model's own built-in data of ``kind`` ("profiles", "regressions", "golden"):
        the fallback while a project has none of its own; None for none."""

    def with_workload(self, profile: Any, workloads: Any) -> Any:
        """``profile`` with its scenarios' requests taken from request traces: seed ``s``'s
        scenario maps the window ``workloads.window(s)`` (a
        :class:`tracediff.workload.WorkloadSet`) into the model's requests, the rest drawn
        from the seed as the generator does; its ``to_dict()`` carries the window's
        :class:`tracediff.workload.WorkloadOrigin` under ``"workload"``. UsageError when the
        model takes no workloads (docs/workloads.md)."""

    def cell(self, scenario: Any) -> tuple[Any, ...]:
        """The part of the profile's matrix a scenario stands for: golden keeps a full trace
        of the smallest scenario of each cell."""

    # -- running ---------------------------------------------------------------------
    def drive(self, scenario: Any, impl: Any, *, check: bool = True) -> Iterator[Record]:
        """Run ``scenario`` through ``impl`` on the model's simulated engine, yielding the
        header and then every record. ``check=False`` leaves the content check of each
        decision record to the caller (:meth:`check_record`)."""

    def exec_factory(self, name: str, target: str, **options: Any) -> Any:
        """The factory of an ``exec:COMMAND`` implementation: a process speaking the
        protocol (with ``probe()``, called once to fail fast). BaseModel's speaks the
        generic layout (:func:`tracediff.process.exec_factory`, whose keyword ``options``
        it takes: ``env``, ``strict``); a model with a layout of its own gives it here and
        its server as an optional ``serve_impl(factory, name, read_fd, write_fd)``."""

    def check_record(self, record: Record, number: int) -> None:
        """Raise SchedulerFault naming the field if a decision record breaks the schema."""

    def engine_files(self) -> tuple[str, ...]:
        """Path fragments of the model's driver and engine code: a traceback frame there is
        the engine refusing what the implementation returned, not the implementation."""

    def state_event(
        self, method: str, args: tuple[Any, ...], result: Any, index: int
    ) -> tuple[str, int]:
        """How the state diff names the event a driver call was (``arrival of request 3``)
        and the body index of the record it belongs to (``index``: the record the driver
        last yielded)."""

    # -- traces ----------------------------------------------------------------------
    def trace_checker(self, header: Mapping[str, Any], name: str) -> Any:
        """A checker for one trace file's records (``check(record, offset=, index=)``),
        TraceFormatError for a header this model cannot read; also gives ``.scenario``."""

    def upgrade_trace(self, path: str, output: str | None) -> Any:
        """Convert a trace of an older format of this model (``tracediff upgrade``);
        UsageError when the model never had another."""

    def as_rows(self, record: Record) -> Record:
        """Like :meth:`rows_view` for a record as an implementation returned it (tables as
        rows or as columns, even malformed ones: kept as they are)."""

    def replay(self, reader: Any, spec: Any, *, until: int | None, want_state: bool) -> Any:
        """Feed a trace's recorded inputs into the implementation ``spec`` and compare each
        decision it makes with the recorded one: a :class:`tracediff.replay.ReplayResult`."""

    def rows_view(self, record: Record) -> Record:
        """The record with its column-stored tables as rows, for people and for diffs."""

    # -- presenting -------------------------------------------------------------------
    def labelled(self, record: Record, columns: Mapping[str, Sequence[str]]) -> Any:
        """A record (tables as rows) with every row an object keyed by its column names
        (``columns``: the header's), for ``tracediff show --plan`` and ``--jsonl``."""

    def scenario_rows(self, scenario: Any) -> list[tuple[str, str]]:
        """The scenario's lines (field, value) in a trace summary."""

    def decision_kind(self, record: Record) -> str:
        """A short name for what a decision did, counted in a trace summary."""

    def decision_summary(self, record: Record) -> str:
        """One line saying what a decision record decided (``replay --until``)."""

    # -- coverage --------------------------------------------------------------------
    @property
    def features(self) -> tuple[str, ...]:
        """What coverage counts per decision (``tracediff coverage``), in report order."""

    @property
    def informational(self) -> frozenset[str]:
        """The features reported but not required: one no scenario reaches is no finding."""

    @property
    def clauses(self) -> Sequence[Clause]:
        """The rule clauses coverage counts when they decide, in report order; one with a
        ``proof`` is not required."""

    spec: str  # the document stating the clauses' rules; a clause's proof is a section of it

    def trace_coverage(self, records: Iterable[Record]) -> tuple[int, tuple[int, ...]]:
        """One trace's records (header first, of any implementation): its decisions and, per
        name of :attr:`features`, the decisions that exercised it. ValueError when the
        records do not start with a header."""

    def observed_coverage(
        self, scenario: Any, impl: str
    ) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        """Drive ``scenario`` through the model's observed twin of the built-in ``impl``:
        (decisions, per feature the decisions that exercised it, per clause of
        :attr:`clauses` the decisions it decided). None when ``impl`` has no observed twin:
        coverage then reads its trace (:meth:`trace_coverage`) and measures no clause."""

    # -- commands --------------------------------------------------------------------
    commands: Mapping[str, str]  # the model's own commands: name -> "module:attr" (lazy)

    # -- search (shrink, fuzz) -------------------------------------------------------
    # tracediff.search owns the loops (budget, timeouts, signatures, the corpus); the model
    # says how its scenarios get smaller and how they are drawn.
    def shrink_passes(self) -> Sequence[ShrinkPass]:
        """The shrink passes, in the order a round runs them: (name, pass). A pass proposes
        candidates through the :class:`Shrinking` it is given; the core keeps one only when
        it is valid, keeps the signature and is smaller in :meth:`size_key`."""

    def size_key(self, scenario: Any, plans: int) -> tuple[int, ...]:
        """The shrink order, well-founded (it makes every shrink end): smaller is simpler.
        ``plans`` is the decisions the scenario's run made."""

    def validate(self, scenario: Any) -> None:
        """Raise ScenarioError for a candidate that is not a valid scenario."""

    def fuzz_strategy(self, max_size: int) -> Any:
        """A Hypothesis strategy of valid scenarios of at most ``max_size`` (:meth:`size`)."""

    def fuzz_targets(self, scenario: Any) -> Mapping[str, int]:
        """Per rule clause, how often it decided in a run of ``scenario`` (empty when none
        can be had): fuzz steers Hypothesis toward scenarios where rare clauses decide."""


# -- search (shrink, fuzz) ---------------------------------------------------------------
class Shrinking(Protocol):
    """What a model's shrink pass works with: the shrink in progress
    (:class:`tracediff.search.shrink.Shrinker`)."""

    @property
    def best(self) -> Any:
        """The smallest interesting scenario so far (it changes as candidates are kept)."""

    @property
    def attempts(self) -> int:
        """Candidate evaluations so far."""

    @property
    def budget(self) -> int:
        """Candidate evaluations the whole shrink may run."""

    def consider(self, candidate: Any) -> bool:
        """Run a candidate; True when it was kept as the new best."""

    def holds(self, candidate: Any) -> bool:
        """True when ``candidate`` is the best or becomes it (a predicate that may re-probe
        a value that worked, for bisections)."""

    def delete_runs(
        self,
        items: Callable[[Any], tuple[Any, ...]],
        rebuild: Callable[[tuple[Any, ...]], Any],
    ) -> None:
        """Adaptive deletion over the sequence ``items(best)``, from its end; ``rebuild``
        makes a scenario of the shortened sequence."""

    def minimize(self, value: int, lower: int, works: Callable[[int], bool]) -> int:
        """A smaller integer that works, ``lower`` first (bisecting simpler numbers)."""


ShrinkPass = tuple[str, Callable[[Shrinking], None]]
"""A shrink pass: its name (progress, reports) and what it runs on the shrink."""


@functools.cache
def _entry_points() -> dict[str, str]:
    found = dict(BUILTIN_MODELS)
    try:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            found.setdefault(ep.name, ep.value)
    except Exception:  # noqa: BLE001 - broken metadata must not hide the built-in model
        pass
    return found


def names() -> list[str]:
    """Every model name tracediff can load."""
    return sorted(_entry_points())


def targets() -> dict[str, str]:
    """Every registered model: name -> ``module:attr`` of its model object."""
    return dict(_entry_points())


@functools.cache
def get(name: str | None = None) -> DecisionModel:
    """The model registered as ``name`` (the default model for None)."""
    wanted = name or DEFAULT_MODEL
    target = _entry_points().get(wanted)
    if target is None:
        raise UsageError(
            f"unknown model {wanted!r}; choose one of: {', '.join(names())} (a model is "
            f"registered with an entry point in the group {ENTRY_POINT_GROUP!r})"
        )
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # noqa: BLE001 - the plugin's
        # to fix; SystemExit too: a plug-in that exits on import must not end tracediff
        # with its exit status
        if isinstance(exc, KeyboardInterrupt) and hasattr(exc, "signum"):
            raise  # a real Ctrl-C while it imported (tracediff.executor.call.Interrupted)
        what = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, SystemExit):
            what = f"SystemExit({exc.code!r:.40})"
        raise UsageError(f"model {wanted!r}: cannot load {target}: {what}") from None
    missing = [m for m in _REQUIRED if not _has(obj, m)]
    if missing:
        raise UsageError(
            f"model {wanted!r} ({target}) lacks {', '.join(missing)}; a model implements "
            "tracediff.model.DecisionModel (docs/models.md)"
        )
    return obj  # type: ignore[no-any-return]


_ABSENT = object()


def _has(obj: Any, name: str) -> bool:
    # statically first: hasattr would run a property (features, clauses), which may import a
    # model's heaviest modules (its coverage) in every process that loads the model
    return inspect.getattr_static(obj, name, _ABSENT) is not _ABSENT or hasattr(obj, name)


_REQUIRED: Sequence[str] = tuple(
    n for n in DecisionModel.__dict__ if not n.startswith("_")
) + tuple(DecisionModel.__annotations__)


def worker_modules() -> dict[str, str]:
    """What a worker process should import before its first task (the local executor's fork
    server does, once), each with the model it is imported for: the module of every model
    this process has loaded, and the modules the model *in effect* names in its optional
    ``worker_modules`` (its driver, engine, schema and built-in implementations). Only that
    model's: another model loaded in passing (``tracediff models`` lists them all) must not
    make every worker carry its imports (the vllm model's are vLLM itself, 1.5 GB of address
    space under a worker's memory limit). A model that names none has them imported by each
    worker when its first task needs them."""
    wanted = _effective_model()
    found: dict[str, str] = {}
    for name, target in sorted(_entry_points().items()):
        module = target.partition(":")[0]
        if module not in sys.modules:
            continue  # not loaded here: no command of this process uses it
        try:
            model = get(name)
        except UsageError:
            continue
        found.setdefault(module, name)
        if name == wanted:
            extra = getattr(model, "worker_modules", ())
            for named in extra:
                if isinstance(named, str):
                    found.setdefault(named, name)
    return found


def _effective_model() -> str:
    """The name of the model in effect (``--model``, ``$TRACEDIFF_MODEL``, the
    configuration's, else the default)."""
    return os.environ.get("TRACEDIFF_MODEL", "").strip() or _configured_model()


# How the project's configuration names its model: installed by tracediff.project when it is
# imported (the core's layers point one way: the project reads this module, never back).
_configured: Callable[[], str | None] | None = None


def set_configured_model(reader: Callable[[], str | None]) -> None:
    """Install what reads ``[tool.tracediff] model`` (tracediff.project does)."""
    global _configured
    _configured = reader


def _configured_model() -> str:
    """The model the project configures (``[tool.tracediff] model``), else the default."""
    if _configured is None:
        return DEFAULT_MODEL
    try:
        return _configured() or DEFAULT_MODEL
    except Exception:  # noqa: BLE001 - a broken configuration fails where it is read
        return DEFAULT_MODEL


# The attribute that names the model a scenario or profile object came from (set by
# :func:`claim`; pickled with the object, so a worker process knows it too).
OWNER_ATTR = "_tracediff_model"
# Which models claimed objects of each class (a class of builtins is never noted).
_CLAIMED: dict[type, set[str]] = {}


def claim(model: DecisionModel | str, obj: Any) -> Any:
    """Note that ``obj`` (a scenario or profile that ``model`` made: generated, read from a
    dict or a trace, loaded) is ``model``'s, so that :func:`of` knows it rather than guess;
    returns ``obj``. The core calls it where a model hands it such an object. The name is
    kept on the object when it takes attributes (a dataclass does, frozen or not; copies
    and pickles keep it), and for its class: objects made from it later by the model's own
    code (a shrunk or mutated scenario) are known by their class."""
    name = model if isinstance(model, str) else model.name
    cls = type(obj)
    if cls.__module__ != "builtins":
        _CLAIMED.setdefault(cls, set()).add(name)
    try:
        object.__setattr__(obj, OWNER_ATTR, name)
    except (AttributeError, TypeError):  # slots, builtins: known by the class alone
        pass
    return obj


def generate(profile: Any, seed: int) -> Any:
    """The scenario of ``seed`` in ``profile``, by the profile's model (:func:`of`), claimed
    as that model's."""
    model = of(profile)
    return claim(model, model.generate(profile, seed))


def of(scenario: Any) -> DecisionModel:
    """The model a scenario (or profile) object belongs to: the one that made it
    (:func:`claim`), else the one that made objects of its class, else the model whose
    package defines its class, else the model in effect (``--model``, the configuration),
    else the default. A class two models made objects of goes to the one in effect when it
    is one of them."""
    try:
        named = vars(scenario).get(OWNER_ATTR)
    except TypeError:  # no __dict__
        named = None
    if isinstance(named, str):
        return get(named)
    claimed = _CLAIMED.get(type(scenario))
    if claimed is not None and len(claimed) == 1:
        return get(next(iter(claimed)))
    owner = _owner(type(scenario).__module__)
    if not claimed:
        return get(owner or _effective_model())
    effective = _effective_model()
    if effective in claimed:
        return get(effective)
    return get(owner if owner in claimed else min(claimed))


@functools.cache
def _owner(module: str) -> str | None:
    """The model whose package holds ``module``: the most specific one when packages nest,
    so that the answer never depends on the order entry points are discovered in."""
    best: tuple[int, str] | None = None
    for name, target in _entry_points().items():
        package = target.partition(":")[0].rpartition(".")[0] or target.partition(":")[0]
        if module == package or module.startswith(package + "."):
            if best is None or (len(package), name) > best:
                best = (len(package), name)
    return None if best is None else best[1]


Factory = Callable[[Any], Any]
