"""Decision models: the engines tracediff can test, each behind the model seam.

The seam itself (the :class:`~tracediff.model.DecisionModel` protocol, the registry) is
:mod:`tracediff.model`; the core never imports this package. A model lives in a package of
its own (``tracediff.models.specdec`` is the built-in one; a user's is anywhere, registered
through the ``tracediff.models`` entry point group) and may build on :class:`BaseModel`,
which gives every part of the protocol a small model can do without a plain default
(docs/models.md).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracediff.errors import UsageError
from tracediff.model import DECISION, Clause, Record


class BaseModel:
    """Defaults for the parts of :class:`DecisionModel` a small model can leave out.

    Subclass it and give the required parts (names, implementations, scenarios, profiles,
    ``drive``, the search and coverage members); every method here is a plain default a
    model overrides when it has more to say. Records are shown and compared as they are
    (no column-stored tables), every field of a record is a choice, ``exec:``
    implementations speak the generic layout of the process protocol (docs/protocol.md)
    and there is no older trace format.
    """

    checked_impls: Mapping[str, str] = {}
    choice_fields: Mapping[str, frozenset[str]] = {}  # none listed: every field is a choice
    commands: Mapping[str, str] = {}
    spec = "its docs"
    size_unit = "item"
    informational: frozenset[str] = frozenset()
    clauses: Sequence[Clause] = ()

    name: str = ""
    methods: tuple[str, ...] = ()
    decide: str = DECISION

    # -- built-in profiles by name, for load_profile and profile_names -------------------
    # A value is a profile, or what makes one when it is loaded (a callable of no arguments:
    # a profile that reads files, as tracediff.workload.over_samples does, reads them only
    # when a command asks for it). A model that loads profiles otherwise overrides both.
    profiles: Mapping[str, Any] = {}

    def load_profile(self, name: str) -> Any:
        """The profile ``name`` of :attr:`profiles`; UsageError naming the choices."""
        if not self.profiles:
            raise UsageError(
                f"the model {self.name!r} has no profiles: give it profiles, or load_profile "
                "and profile_names (docs/models.md)"
            )
        if name not in self.profiles:
            raise UsageError(
                f"unknown profile {name!r}; choose one of: {', '.join(self.profile_names())}"
            )
        found = self.profiles[name]
        return found() if callable(found) else found

    def profile_names(self) -> list[str]:
        return sorted(self.profiles)

    # -- a generator written against draws (tracediff.draws) gives the rest ----------------
    fuzz_profile = "quick"  # the profile whose generator settings fuzz draws scenarios with

    def generate(self, profile: Any, seed: int) -> Any:
        """The scenario of one seed: ``generate_from(profile, seed, draws)`` with draws
        seeded by ``"<model>:<profile>:<seed>"`` (a model may write ``generate`` itself)."""
        if not callable(getattr(self, "generate_from", None)):
            raise UsageError(
                f"the model {self.name!r} has neither generate(profile, seed) nor "
                "generate_from(profile, seed, draws); give one (docs/models.md)"
            )
        from tracediff.search.draws import generate_seeded

        return generate_seeded(self, profile, seed)

    def shrink_passes(self) -> Sequence[Any]:
        """With ``generate_from``: the passes that reduce a scenario's recorded draws (every
        candidate a valid scenario by construction); a model adds its own refinements."""
        if not callable(getattr(self, "generate_from", None)):
            return ()
        from tracediff.search.draws import shrink_passes

        return shrink_passes(self)

    def fuzz_strategy(self, max_size: int) -> Any:
        """With ``generate_from``: scenarios drawn by Hypothesis through the generator, with
        the settings of the profile :attr:`fuzz_profile`, at most ``max_size`` large."""
        if not callable(getattr(self, "generate_from", None)):
            raise UsageError(
                f"the model {self.name!r} has no fuzz strategy: give it fuzz_strategy, or "
                "write its generator as generate_from(profile, seed, draws) (docs/models.md)"
            )
        from tracediff.search.draws import fuzz_strategy

        return fuzz_strategy(self, self.load_profile(self.fuzz_profile), max_size)

    def size_key(self, scenario: Any, plans: int) -> tuple[int, ...]:
        """The shrink order: fewer items, then fewer plans."""
        size: Callable[[Any], int] = getattr(self, "size")  # noqa: B009 - the subclass's
        return (size(scenario), plans)

    def private_copy(self, scenario: Any) -> Any:
        return copy.deepcopy(scenario)

    def relabel(self, scenario: Any, profile: str) -> Any:
        return dataclasses.replace(scenario, profile=profile)

    def cell(self, scenario: Any) -> tuple[Any, ...]:
        return ()

    def data_dir(self, kind: str) -> Path | None:
        return None

    def with_workload(self, profile: Any, workloads: Any) -> Any:
        raise UsageError(
            f"the model {self.name!r} takes no workloads: it maps no request trace into its "
            "scenarios; drop --workload (or the profile's [workload] table), or give the model "
            "a with_workload (docs/models.md, docs/workloads.md)"
        )

    def exec_factory(self, name: str, target: str, **options: Any) -> Any:
        # the generic layout: a call is its method name and arguments (docs/protocol.md)
        from tracediff.process import exec_factory

        return exec_factory(self, name, target, **options)

    def check_record(self, record: Record, number: int) -> None:
        from tracediff.errors import SchedulerFault

        if not isinstance(record, dict) or record.get("t") != DECISION:
            raise SchedulerFault(f"plan {number}: malformed plan record: {record!r:.80}")

    def engine_files(self) -> tuple[str, ...]:
        # ``drive`` is this class's method: the frame after it is the implementation's call
        return (inspect.getfile(type(self)),)

    def state_event(
        self, method: str, args: tuple[Any, ...], result: Any, index: int
    ) -> tuple[str, int]:
        if method == self.decide:
            number = result.get("plan") if isinstance(result, dict) else None
            return f"plan {number}", index
        return f"{method}()", index

    def trace_checker(self, header: Mapping[str, Any], name: str) -> Any:
        return GenericChecker(self, header, name)

    def rows_view(self, record: Record) -> Record:
        return record

    def as_rows(self, record: Record) -> Record:
        return record

    def labelled(self, record: Record, columns: Mapping[str, Sequence[str]]) -> Any:
        return record

    def scenario_rows(self, scenario: Any) -> list[tuple[str, str]]:
        size: Callable[[Any], int] = getattr(self, "size")  # noqa: B009 - the subclass's
        return [("size", str(size(scenario)))]

    def decision_kind(self, record: Record) -> str:
        return DECISION

    def decision_summary(self, record: Record) -> str:
        fields = ", ".join(f"{k} {v}" for k, v in record.items() if k not in ("t", "plan", "now"))
        return f"plan {record.get('plan')} at {record.get('now')}: {fields}"

    def upgrade_trace(self, path: str, output: str | None) -> Any:
        raise UsageError(f"the model {self.name!r} has one trace format; nothing to upgrade")

    def validate(self, scenario: Any) -> None:
        return None

    def fuzz_targets(self, scenario: Any) -> Mapping[str, int]:
        return {}

    def clause_counts(self, scenario: Any, impl: str) -> Mapping[str, int]:
        """Per clause of :attr:`clauses`, how often it decided in the observed run of the
        built-in ``impl`` (:meth:`observed_coverage`); empty when it has no observed twin.
        What a model's ``fuzz_targets`` returns for its baseline."""
        observed = self.observed_coverage(scenario, impl)
        if observed is None:
            return {}
        return {c.name: n for c, n in zip(self.clauses, observed[2], strict=True)}

    def observed_coverage(
        self, scenario: Any, impl: str
    ) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        return None

    def replay_input(self, impl: Any, record: Record, scenario: Any) -> list[Record] | None:
        """Apply one recorded input record to ``impl`` (replay); returns the decision
        records the call owes the trace next (often none), or None when ``record`` is no
        input of this model."""
        return None

    def replay(self, reader: Any, spec: Any, *, until: int | None, want_state: bool) -> Any:
        from tracediff.replay import replay_generic

        return replay_generic(self, reader, spec, until=until, want_state=want_state)


class GenericChecker:
    """A trace checker for a model without a schema of its own: the header holds the
    model's scenario and every record is a map with a string ``t`` and an integer clock
    ``now`` that never goes back."""

    def __init__(self, model: Any, header: Mapping[str, Any], name: str) -> None:
        from tracediff.errors import ScenarioError, TraceFormatError

        self.name = name
        try:
            self.scenario = model.scenario_from_dict(header.get("scenario"))
        except (ScenarioError, TypeError, ValueError, AttributeError) as exc:
            raise TraceFormatError(
                name, f"header: scenario is unusable: {exc}", offset=None, record=0
            ) from None
        self._now = 0

    def check(self, record: Any, *, offset: int | None, index: int) -> None:
        from tracediff.errors import TraceFormatError

        now: Any = record.get("now") if isinstance(record, dict) else None
        problem = None
        if not isinstance(record, dict) or not isinstance(record.get("t"), str):
            problem = "a record is not a map with a string type 't'"
        elif not isinstance(now, int) or isinstance(now, bool):
            problem = f"{record['t']} record has no integer clock 'now'"
        elif now < self._now:
            problem = f"{record['t']} record at {now} goes back in time (after {self._now})"
        if problem is not None:
            raise TraceFormatError(self.name, problem, offset=offset, record=index)
        self._now = now
