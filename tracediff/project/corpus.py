"""The regression corpus: scenarios that once diverged, replayed first by ``tracediff gate``.

A corpus is a directory of ``*.json`` files, each holding one scenario as
:meth:`Scenario.to_dict` writes it (``tracediff shrink --save`` adds them). Files are read in
name order, so a gate replays them in the same order everywhere. A file that is not JSON is
a :class:`TraceFormatError`; JSON that is not a valid scenario is a :class:`ScenarioError`;
both name the file and say what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracediff import model as models
from tracediff.errors import NESTING, ScenarioError, TraceFormatError, UsageError
from tracediff.filenames import component, inside
from tracediff.model import DecisionModel, Scenario, claim

DEFAULT_DIR = "scenarios/regressions"
# A corpus scenario is run under the profile name "regression:<profile>", so that a report
# never mistakes it for the profile's seed of the same number.
REGRESSION_PREFIX = "regression:"
# What tracediff shrink --save writes (tracediff/search/shrink.py), checked when a file says it.
REGRESSION_FORMAT = "tracediff-regression"
REGRESSION_VERSIONS = (1,)
MODEL_KEY = "model"  # a scenario file of a model other than the default names it
MAX_BYTES = 64 * 1024 * 1024  # a scenario is a few kB; anything this big is not one


def corpus_files(directory: str | Path) -> list[Path]:
    """The scenario files of a corpus, in the order :func:`load_corpus` reads them."""
    return sorted(Path(directory).glob("*.json"))


def load_corpus(directory: str | Path, *, missing_ok: bool = False) -> list[Scenario]:
    """Every scenario of a corpus directory, in file-name order (may be empty)."""
    root = Path(directory)
    if not root.is_dir():
        if missing_ok and not root.exists():
            return []
        raise UsageError(
            f"regression corpus {root} is not a directory; pass --regressions DIR "
            "(a directory of scenario .json files)"
        )
    return [load_scenario(path) for path in corpus_files(root)]


BUILTIN_PREFIX = "builtin:"  # names a file of the built-in corpus, wherever it is installed


def builtin_name(path: str | Path) -> str | None:
    """``builtin:NAME`` when ``path`` is a file of the built-in corpus (how a reproduce
    command names it, never by its site-packages path), else None."""
    from tracediff.resources import builtin_dir

    builtin = builtin_dir("regressions")
    if builtin is not None and Path(path).resolve().parent == builtin.resolve():
        return f"{BUILTIN_PREFIX}{Path(path).name}"
    return None


def load_scenario(path: str | Path) -> Scenario:
    """One scenario file of the corpus (``builtin:NAME``: one of the built-in corpus)."""
    text_path = str(path)
    if text_path.startswith(BUILTIN_PREFIX):
        from tracediff.resources import builtin_dir

        builtin = builtin_dir("regressions")
        name = text_path[len(BUILTIN_PREFIX) :]
        if builtin is None or name != component(name) or not (builtin / name).is_file():
            raise UsageError(
                f"{text_path}: no such scenario in the built-in corpus; "
                "see tracediff's scenarios/regressions"
            )
        path = builtin / name
    name = str(path)
    try:
        size = Path(path).stat().st_size
        if size > MAX_BYTES:
            raise TraceFormatError(name, f"{size} bytes is too large for a scenario file")
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(name, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(name, "not UTF-8 text; a scenario file is JSON") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(
            name,
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix or remove the file",
        ) from None
    except RecursionError:
        raise TraceFormatError(name, f"not a scenario file: {NESTING}") from None
    if not isinstance(data, dict):
        raise ScenarioError(
            f"{name}: expected a scenario object (Scenario.to_dict()), got a JSON "
            f"{type(data).__name__}"
        )
    # A saved regression says what it is; a plain Scenario.to_dict() says nothing.
    if "format" in data or "version" in data:
        if data.get("format") != REGRESSION_FORMAT:
            raise TraceFormatError(
                name,
                f"format {str(data.get('format'))[:40]!r} is not {REGRESSION_FORMAT!r}; not a "
                "scenario file (fix or remove it)",
            )
        if data.get("version") not in REGRESSION_VERSIONS:
            raise TraceFormatError(
                name,
                f"regression file version {str(data.get('version'))[:20]}; this tracediff "
                f"reads {list(REGRESSION_VERSIONS)} (save it again with tracediff shrink --save)",
            )
    try:
        model = model_of(data, name)
        found: Scenario = claim(model, model.scenario_from_dict(data))
        return found
    except ScenarioError as exc:
        raise ScenarioError(f"{name}: {exc}; fix or remove the file") from None


def model_of(data: dict[str, Any], name: str) -> DecisionModel:
    """The model a scenario file names (its ``model`` key, taken out of ``data``); a file
    that names none is the default model's (every file written before models had names)."""
    named = data.pop(MODEL_KEY, None)
    if named is not None and not isinstance(named, str):
        raise ScenarioError(f"{name}: model is {type(named).__name__}, expected a model name")
    return models.get(named)


def scenario_document(scenario: Scenario) -> dict[str, Any]:
    """A scenario as a corpus file holds it: ``to_dict()``, with its model's name unless it
    is the default model's."""
    data = scenario.to_dict()
    model = models.of(scenario)
    if model.name != models.DEFAULT_MODEL:
        data = {MODEL_KEY: model.name, **data}
    return data


def save_scenario(scenario: Scenario, directory: str | Path, finding: str | None = None) -> Path:
    """Write a scenario into a corpus as ``<profile>-<seed>.json`` (with a ``finding``, its
    signature's slug: ``<profile>-<seed>-<finding>-<content tag>.json``, unique per
    finding); returns the path."""
    from tracediff.atomic import write_text_atomic

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    parts: tuple[object, ...] = (scenario.profile, scenario.seed)
    if finding is not None:
        from tracediff.filenames import scenario_tag

        parts += (finding, scenario_tag(scenario))
    path = inside(root, f"{component(*parts)}.json", what="corpus")
    write_text_atomic(str(path), json.dumps(scenario_document(scenario), indent=1) + "\n")
    return path
