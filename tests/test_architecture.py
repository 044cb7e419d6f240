"""The package's layout: no import cycle between modules, and nothing private imported across modules.

Every import counts (module level, inside functions, under ``if TYPE_CHECKING``): a cycle that only
lazy imports keep from failing is still two modules that cannot be understood apart."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "recjudge"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


def _imports(name: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name, line) for every ``import``/``from … import`` of ``name``."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub if sub in MODULES else target, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names]
    return [(m, n, line) for m, n, line in out if m in MODULES]


def _related(a: str, b: str) -> bool:
    """A package and its own submodules (``__init__`` re-exports, a submodule reading its package)."""
    return a.startswith(b + ".") or b.startswith(a + ".")


def import_graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in _imports(m) if t != m and not _related(m, t)} for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle():
    # a → b → c → a is one cycle; d → a hangs off it; e stands alone
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    assert cycles(import_graph()) == []


def test_what_another_module_needs_is_public():
    """A ``_name`` imported from another module is a private name leaking; a package's private
    submodule (``systems._recbole``) may be imported by its own package only."""
    leaks = []
    for module in MODULES:
        package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
        for target, name, line in _imports(module):
            if not name.startswith("_") or name.startswith("__"):
                continue
            # `from . import _recbole` in recjudge.systems resolves to the module recjudge.systems._recbole
            own_private_module = target == f"{package}.{name}"
            if target != module and not own_private_module:
                leaks.append(f"{MODULES[module].relative_to(SRC.parent)}:{line}: {name} from {target}")
    assert leaks == []
