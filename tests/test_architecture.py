"""The code's shape, as docs/design.md states it: small modules, short
functions, no import cycles. (The layer order itself is import-linter's contract in
pyproject.toml, checked by `make test`.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "hierarchy", "router", "training", "logicroute")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _modules(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_every_module_is_under_the_line_limit():
    # the tests too: a spec file is read like the code, one topic at a time
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules(*PACKAGES, "tests")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_every_function_is_under_the_line_limit():
    long = {}
    for p in _modules(*PACKAGES):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.name}"] = n
    assert long == {}


def test_no_import_cycles_between_modules():
    import grimp  # comes with import-linter (the [dev] extra)
    import networkx as nx

    graph = grimp.build_graph(*PACKAGES)  # function-level imports count too
    g = nx.DiGraph()
    for m in graph.modules:
        for imported in graph.find_modules_directly_imported_by(m):
            g.add_edge(m, imported)
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert cycles == []


def test_the_public_api_imports_from_engine_lazily():
    code = (
        "import sys, engine\n"
        "assert 'engine.core.pipeline' not in sys.modules, 'import engine loaded the pipeline'\n"
        "from engine import Answer, Budget, RoutedRAG\n"
        "import engine.floor.base.types as types, engine.core.pipeline as pipeline\n"
        "assert (RoutedRAG, Budget, Answer) == (pipeline.RoutedRAG, pipeline.Budget, types.Answer)\n"
    )
    _runs_clean(code)


def test_the_facade_named_after_the_distribution_loads_nothing_until_used():
    code = (
        "import sys, logicroute\n"
        "heavy = [m for m in ('engine.core.pipeline', 'torch', 'sentence_transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from logicroute import RoutedRAG, Source, format_sources\n"
        "import engine.core.pipeline, engine.floor.base.types, engine.floor.sources_text\n"
        "assert RoutedRAG is engine.core.pipeline.RoutedRAG and Source is engine.floor.base.types.Source\n"
        "assert format_sources is engine.floor.sources_text.format_sources\n"
    )
    _runs_clean(code)


def _runs_clean(code: str) -> None:
    """`code` run by a fresh interpreter in the project root exits 0 (its asserts held)."""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_package_data_pattern_names_files_that_exist():
    """A data file moved with its package is still shipped: each package-data glob of
    pyproject.toml matches at least one file under its package."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    empty = [f"{pkg}: {glob}" for pkg, globs in data.items() for glob in globs if not list((ROOT / pkg).glob(glob))]
    assert empty == []
