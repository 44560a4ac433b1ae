"""The package's layering, read from its source (an ast scan; nothing is imported).

Rules that hold today and must keep holding:

* click only in ``tracediff/cli/`` and a model's own commands (``tracediff/models/*/commands/``;
  the pytest plugin and the core never parse options);
* rich only there and in ``tracediff/report/`` (the core never prints);
* torch only in ``tracediff/models/specdec/live/`` (the live engine's optional extra) and the
  vllm model's adapter (vLLM's KV cache spec takes a torch dtype; the vllm extra);
* ``compare/`` never imports ``report/`` (presenters read what comparison produced);
* the core (everything outside ``tracediff/models/``) imports nothing of a model, not even
  inside a function: it reaches one through the seam, ``tracediff.model``; and a model
  imports no other model.

No import cycle between modules, and no import of another module's private (``_name``)
names: a name two modules share is public. Cycles between parts (a subpackage or a
top-level module counted as one) are a debt being paid down: their bound is today's count,
lowered whenever a change removes some, so that no change adds one unnoticed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tracediff"

# Ratchets: today's counts (they may only go down).
MAX_MODULES_IN_CYCLES = 0  # modules in a strongly connected component of the import graph
MAX_PARTS_IN_CYCLES = 0  # the same between parts (a subpackage or top-level module is one)
MAX_PRIVATE_IMPORTS = 0  # names taken by `from tracediff.x import _name` elsewhere


@dataclass(frozen=True)
class Import:
    importer: str  # module name, e.g. tracediff.cli.run
    imported: str  # module or package imported from
    names: tuple[str, ...]  # names taken with `from X import a, b` (empty for `import X`)
    lazy: bool  # inside a function (run when called), not at module level


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    module_level = {id(node) for node in tree.body}

    def walk(node: ast.AST, lazy: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                continue  # annotations only: not a dependency when the code runs
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(name, alias.name, (), lazy)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                yield Import(name, source, tuple(a.name for a in child.names), lazy)
            yield from walk(child, inner)

    del module_level
    yield from walk(tree, False)


def _type_checking_only(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _all_imports() -> list[Import]:
    found: list[Import] = []
    for name, path in _modules().items():
        found.extend(_imports(name, path))
    return found


def _target(imported: str, names: tuple[str, ...], modules: dict[str, Path]) -> list[str]:
    """The modules of the package an import depends on (a `from pkg import mod` names one)."""
    targets = []
    for name in names:
        if f"{imported}.{name}" in modules:
            targets.append(f"{imported}.{name}")
    if imported in modules and (not names or len(targets) < len(names)):
        targets.append(imported)
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for imp in _all_imports():
        if imp.imported == "tracediff" and not imp.names:
            continue
        if imp.imported.startswith("tracediff"):
            for target in _target(imp.imported, imp.names, modules):
                if target != imp.importer:
                    graph[imp.importer].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _private_imports(imports: list[Import] | None = None) -> list[Import]:
    modules = _modules()
    found = []
    for imp in _all_imports() if imports is None else imports:
        if not imp.imported.startswith("tracediff") or imp.importer == imp.imported:
            continue
        private = [
            n
            for n in imp.names
            if n.startswith("_") and not n.endswith("__") and f"{imp.imported}.{n}" not in modules
        ]
        if private:
            found.append(Import(imp.importer, imp.imported, tuple(private), imp.lazy))
    return found


# A model's own commands (DecisionModel.commands) and their tables.
MODEL_COMMANDS = re.compile(r"tracediff\.models\.[^.]+\.commands(\.|$)")


def _outside(
    prefixes: tuple[str, ...], library: str, also: re.Pattern[str] | None = None
) -> list[str]:
    return sorted(
        f"{imp.importer} imports {imp.imported}"
        for imp in _all_imports()
        if (imp.imported == library or imp.imported.startswith(f"{library}."))
        and not imp.importer.startswith(prefixes)
        and not (also is not None and also.match(imp.importer))
    )


def test_click_only_in_the_cli_and_the_model_commands() -> None:
    assert _outside(("tracediff.cli",), "click", MODEL_COMMANDS) == []


# A model's own commands and its state presenter (DecisionModel.present_state, optional).
MODEL_PRESENTERS = re.compile(r"tracediff\.models\.[^.]+\.(commands(\.|$)|state_view$)")


def test_rich_only_in_the_cli_the_presenters_and_the_model_commands() -> None:
    assert _outside(("tracediff.cli", "tracediff.report"), "rich", MODEL_PRESENTERS) == []


def test_the_allowance_for_model_commands_is_only_theirs() -> None:
    assert MODEL_COMMANDS.match("tracediff.models.specdec.commands.bench")
    assert MODEL_COMMANDS.match("tracediff.models.specdec.commands")
    assert not MODEL_COMMANDS.match("tracediff.models.specdec.live.engine")
    assert not MODEL_COMMANDS.match("tracediff.models.specdec.commandsx")


MODELS = "tracediff.models"


def _model_of(module: str) -> str | None:
    """The model package a module belongs to (``tracediff.models.specdec``), or None."""
    parts = module.split(".")
    return ".".join(parts[:3]) if module.startswith(f"{MODELS}.") and len(parts) > 2 else None


def test_the_core_imports_no_model() -> None:
    """Everything outside tracediff/models/ reaches a model only through the seam
    (tracediff.model): not at module level, not inside a function."""
    wrong = sorted(
        f"{imp.importer} imports {imp.imported}"
        + (f" ({', '.join(imp.names)})" if imp.names else "")
        + (" (in a function)" if imp.lazy else "")
        for imp in _all_imports()
        if not imp.importer.startswith(MODELS)
        and (
            imp.imported.startswith(f"{MODELS}.")
            or (imp.imported == MODELS and imp.importer != MODELS)
            or (imp.imported == "tracediff" and "models" in imp.names)
        )
    )
    assert wrong == [], "use tracediff.model.of(scenario) or tracediff.model.get(name)"


def test_a_model_imports_no_other_model() -> None:
    wrong = sorted(
        f"{imp.importer} imports {imp.imported}"
        for imp in _all_imports()
        if _model_of(imp.importer) is not None
        and _model_of(imp.imported) is not None
        and _model_of(imp.importer) != _model_of(imp.imported)
    )
    assert wrong == []


# What a model outside tracediff may import of the core: the modules docs/models.md lists
# under "What a model may import". The second built-in model (kvbatch) and the toy model
# of the tests are held to it, so a user's model can do whatever they do.
MODEL_API = (
    "tracediff.model",
    "tracediff.models",
    "tracediff.errors",
    "tracediff.workload",
    "tracediff.search.passes",
    "tracediff.resources",
    "tracediff.project.impls",
    "tracediff.project.seeds",
)
# ... and for a model's own commands (DecisionModel.commands) only, the command line's
# shared pieces.
MODEL_COMMANDS_API = ("tracediff.cli.app", "tracediff.cli.params")

TOY_MODEL = Path(__file__).resolve().parent / "toymodel" / "toy_model.py"


def _beyond_the_model_api(imports: list[Import], model: str) -> list[str]:
    wrong = []
    for imp in imports:
        imported = imp.imported
        if imported == "tracediff" and imp.names:
            imported = f"tracediff.{imp.names[0]}" if len(imp.names) == 1 else imported
        if not imported.startswith("tracediff") or imported.startswith(model):
            continue
        allowed = MODEL_API + (MODEL_COMMANDS_API if MODEL_COMMANDS.match(imp.importer) else ())
        private = [n for n in imp.names if n.startswith("_") and not n.endswith("__")]
        if imported not in allowed or private:
            wrong.append(f"{imp.importer} imports {imported} ({', '.join(imp.names)})")
    return sorted(wrong)


@pytest.mark.parametrize("model", ["tracediff.models.kvbatch", "tracediff.models.vllm"])
def test_kvbatch_and_vllm_use_only_what_a_users_model_may_import(model: str) -> None:
    """kvbatch was added with nothing in the core changed, vllm with one optional hook
    (``adapt_impl``); they reach the core only through the documented model API, as a model
    in another distribution would."""
    imports = [imp for imp in _all_imports() if imp.importer.startswith(model)]
    assert len(imports) > 20  # the scan sees the model
    assert _beyond_the_model_api(imports, model) == []


def test_the_toy_model_uses_only_the_model_api() -> None:
    imports = list(_imports("toy_model", TOY_MODEL))
    assert any(imp.imported == "tracediff.model" for imp in imports)
    assert _beyond_the_model_api(imports, "toy_model") == []


def test_the_model_api_is_the_one_the_docs_list() -> None:
    docs = (PACKAGE.parent / "docs" / "models.md").read_text(encoding="utf-8")
    section = docs.split("## What a model may import", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(tracediff(?:\.[a-z_]+)*)`", section))
    assert listed == set(MODEL_API + MODEL_COMMANDS_API)


def test_the_model_api_check_refuses_the_core_beyond_it() -> None:
    sample = [
        Import("tracediff.models.x.a", "tracediff.running.runner", ("run_scenario",), False),
        Import("tracediff.models.x.a", "tracediff.errors", ("_hidden",), False),
        Import("tracediff.models.x.a", "tracediff.cli.params", ("impl_option",), False),
        Import("tracediff.models.x.commands.b", "tracediff.cli.params", ("impl_option",), False),
        Import("tracediff.models.x.a", "tracediff.model", ("Clause",), False),
    ]
    assert _beyond_the_model_api(sample, "tracediff.models.x") == [
        "tracediff.models.x.a imports tracediff.cli.params (impl_option)",
        "tracediff.models.x.a imports tracediff.errors (_hidden)",
        "tracediff.models.x.a imports tracediff.running.runner (run_scenario)",
    ]


# What running an implementation in another process takes: the core's (tracediff.process),
# never a model's. A model with a layout of its own (specdec) says what its messages hold
# and builds on tracediff.process for the rest.
PROCESS_LIBRARIES = ("subprocess", "select", "socket", "signal", "multiprocessing")
PROCESS_CALLS = ("dup", "dup2", "pipe", "set_blocking", "fork", "kill", "sched_setaffinity")


def _process_code(name: str, path: Path) -> list[str]:
    found = [
        f"{name} imports {imp.imported}"
        for imp in _imports(name, path)
        if imp.imported.split(".")[0] in PROCESS_LIBRARIES
    ]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in PROCESS_CALLS
        ):
            found.append(f"{name} calls os.{node.attr} (line {node.lineno})")
    return found


def test_no_model_holds_process_code() -> None:
    """Processes, pipes, timeouts, stderr, pinning and their lifetime are the core's
    (tracediff/process/): every model runs in another process with none of it."""
    modules = _modules()
    wrong = [
        problem
        for name, path in modules.items()
        if name.startswith(f"{MODELS}.")
        for problem in _process_code(name, path)
    ]
    wrong += _process_code("toy_model", TOY_MODEL)
    assert wrong == []
    # the scan sees process code where it is
    assert _process_code("tracediff.process.pipes", modules["tracediff.process.pipes"])
    # specdec's layout reaches it through the core
    layout = [i.imported for i in _imports("x", modules["tracediff.models.specdec.external"])]
    assert "tracediff.process.pipes" in layout


def test_torch_only_in_the_live_engine_and_the_vllm_adapter() -> None:
    allowed = ("tracediff.models.specdec.live", "tracediff.models.vllm.adapter")
    assert _outside(allowed, "torch") == []


def test_comparison_never_imports_the_presenters() -> None:
    wrong = [
        f"{imp.importer} imports {imp.imported}"
        for imp in _all_imports()
        if imp.importer.startswith("tracediff.compare")
        and imp.imported.startswith("tracediff.report")
    ]
    assert wrong == []


def test_import_cycles_only_shrink() -> None:
    cycles = _cycles(_graph())
    members = sorted({m for c in cycles for m in c})
    print(f"{len(cycles)} cycles over {len(members)} modules: {cycles}")
    assert len(members) <= MAX_MODULES_IN_CYCLES, (
        f"{len(members)} modules are in import cycles (at most {MAX_MODULES_IN_CYCLES}): "
        f"{cycles}; break the new cycle (move the shared piece down a layer), or lower the "
        "bound when a change removed some"
    )


def _parts(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the package's parts: each subpackage (``tracediff.compare``) or
    top-level module (``tracediff.running.runner``) as one node. A model's own commands
    count with the command line, whose layer they are (they build on ``tracediff.cli.app``
    as its commands do, and no model module imports them)."""

    def part(name: str) -> str:
        if MODEL_COMMANDS.match(name):
            return "tracediff.cli"
        return ".".join(name.split(".")[:2])

    parts: dict[str, set[str]] = {}
    for node, targets in graph.items():
        edges = parts.setdefault(part(node), set())
        edges.update(part(t) for t in targets if part(t) != part(node))
    for targets in list(parts.values()):
        for target in targets:
            parts.setdefault(target, set())
    return parts


def test_cycles_between_parts_only_shrink() -> None:
    cycles = _cycles(_parts(_graph()))
    members = sorted({m for c in cycles for m in c})
    print(f"{len(cycles)} cycles between parts, over {len(members)} parts: {cycles}")
    assert len(members) <= MAX_PARTS_IN_CYCLES, (
        f"{len(members)} parts (subpackages, top-level modules) are in import cycles (at most "
        f"{MAX_PARTS_IN_CYCLES}): {cycles}; or lower the bound when a change removed some"
    )


def test_private_cross_module_imports_only_shrink() -> None:
    private = _private_imports()
    listed = sorted(f"{i.importer} <- {i.imported}.{','.join(i.names)}" for i in private)
    names = sum(len(i.names) for i in private)
    print(f"{names} private names in {len(private)} imports:\n" + "\n".join(listed))
    assert names <= MAX_PRIVATE_IMPORTS, (
        f"{names} imports of another module's private names (at most "
        f"{MAX_PRIVATE_IMPORTS}): make the name public where it is shared, or keep it "
        f"in its module:\n" + "\n".join(listed)
    )


def test_the_scan_sees_what_it_claims() -> None:
    """The scanner itself: a known edge, a known private import, a cycle it can find."""
    graph = _graph()
    assert "tracediff.project.config" in graph["tracediff.project"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    sample = [Import("tracediff.a", "tracediff.b", ("_hidden", "shown", "__version__"), True)]
    assert [i.names for i in _private_imports(sample)] == [("_hidden",)]
