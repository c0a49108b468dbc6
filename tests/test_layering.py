"""The packages' layers: ``raypipe`` (the library) loads without ``actors`` or ``cluster`` (the
service is imported on first use, inside functions), and ``actors`` (what runs in a pipeline
actor or a CPU helper) never imports ``cluster`` (the service's driver and rank side)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _imported(tree: ast.AST, nodes=None) -> set[str]:
    """Top-level names of the modules imported by the statements ``nodes`` (default: all of ``tree``)."""
    names = set()
    for node in nodes if nodes is not None else ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _on_load(tree: ast.Module) -> list[ast.AST]:
    """The statements that run when the module loads: none inside a function or an
    ``if TYPE_CHECKING:`` block."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        deferred = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        )
        if deferred:
            skipped |= {id(n) for n in ast.walk(node)}
    return [n for n in ast.walk(tree) if id(n) not in skipped]


def _modules(package: str) -> dict[str, ast.Module]:
    return {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text()) for p in (ROOT / package).rglob("*.py")}


def test_the_library_loads_without_the_service():
    offending = {
        path: sorted(_imported(tree, _on_load(tree)) & {"actors", "cluster"})
        for path, tree in _modules("raypipe").items()
    }
    assert not {p: names for p, names in offending.items() if names}


def test_the_actors_never_import_the_service_side():
    offending = {path: "cluster" for path, tree in _modules("actors").items() if "cluster" in _imported(tree)}
    assert not offending


def test_the_check_sees_imports_on_load_and_in_functions():
    tree = ast.parse("import cluster.loader\ndef f():\n    from actors import host_ring\n")
    assert _imported(tree) == {"cluster", "actors"} and _imported(tree, _on_load(tree)) == {"cluster"}


def test_only_the_entry_points_reach_the_service():
    """Inside functions, three modules of the library use the service: the facade (``rp.serve``,
    ``rp.loader``), the Lightning data module over ``rp.loader``, and the benchmark's meter of the
    object store. No other library module calls up into ``actors`` or ``cluster``."""
    reaching = {path for path, tree in _modules("raypipe").items() if _imported(tree) & {"actors", "cluster"}}
    assert reaching == {"raypipe/__init__.py", "raypipe/plugin/lightning.py", "raypipe/bench/memory.py"}
