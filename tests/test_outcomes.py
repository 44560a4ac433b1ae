"""The one outcome vocabulary: enums whose members are their words."""

from __future__ import annotations

import json
import pickle

from tracediff import api
from tracediff.compare import model
from tracediff.executor import base
from tracediff.outcomes import Kind, Status, Step, TaskEnd
from tracediff.running import runner


def test_every_module_speaks_the_same_vocabulary() -> None:
    assert runner.IDENTICAL is api.IDENTICAL is model.IDENTICAL is Status.IDENTICAL
    assert runner.ERROR is Status.ERROR and model.ERROR is Kind.ERROR
    assert model.KINDS == tuple(Kind)
    assert model.FAILED is Step.FAILED and base.DONE is TaskEnd.DONE


def test_members_are_their_words_in_files_and_across_processes() -> None:
    assert Status("diverged") is Status.DIVERGED and Status.DIVERGED == "diverged"
    assert json.dumps({"status": Status.TIMEOUT}) == '{"status": "timeout"}'
    assert f"{Kind.ROUNDING}" == "rounding"
    assert pickle.loads(pickle.dumps(Step.NOT_CONFIGURED)) is Step.NOT_CONFIGURED


def test_each_outcome_describes_itself() -> None:
    assert [s.exit_code for s in Status] == [0, 1, 1, 1]
    assert not Status.IDENTICAL.finding and Status.ERROR.finding
    assert all(kind.description and kind.style for kind in Kind)
    assert [s for s in Step if s.skipped] == [Step.NOT_CONFIGURED, Step.EMPTY]
    assert all(end.description for end in TaskEnd)
