"""The layers of the code hold: no module imports one above its own layer, no import cycle, and no
function-level import hides a dependency (the two exceptions say why). The picture is the README's Layout.

Read from the sources (``ast``), not by importing them: a cycle that Python happens to resolve still fails.
Imports under ``if TYPE_CHECKING:`` are left out (they name types, never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"hoodie": ROOT / "core" / "hoodie", "hoodied": ROOT / "services" / "hoodied"}

#: Lowest first. A module belongs to the layer of the longest prefix naming it. Foundation modules know
#: nothing of Hudi's timeline; names are the file and instant grammars everything else parses; format reads
#: what is on storage; the table is the read API over it; the commit protocol changes a table safely; the
#: services (one package each, on the table-service interface) use all of it; the registry lists them;
#: testing writes tables for tests and the demo; the daemon (hoodied) sits on top.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "hoodie.errors",
            "hoodie.varint",
            "hoodie.durations",
            "hoodie.memory",
            "hoodie.failpoints",
            "hoodie.settings",
            "hoodie.lease_margin",
            "hoodie.keygen",
            "hoodie.bloom",
            "hoodie.schema",
            "hoodie.storage",
            "hoodie.java_compat",
            "hoodie.config",
            "hoodie.new_table",
            "hoodie.avro",
            "hoodie.hfile",
            "hoodie.parquet",
            "hoodie.lock",
        ),
    ),
    (
        "names",
        ("hoodie.timeline.instant", "hoodie.log.log_file", "hoodie.file_group.base_file"),
    ),
    (
        "format",
        (
            "hoodie.timeline",
            "hoodie.log",
            "hoodie.file_group",
            "hoodie.read",
            "hoodie.metadata",
        ),
    ),
    ("table", ("hoodie", "hoodie.table")),
    (
        "commit protocol",
        (
            "hoodie.timeline.writer",
            "hoodie.write",
            "hoodie.metadata.writer",
            "hoodie.metadata.updates",
            "hoodie.metadata_table",
        ),
    ),
    (
        "services",
        (
            "hoodie.table_service",
            "hoodie.compaction",
            "hoodie.logcompaction",
            "hoodie.clustering",
            "hoodie.clean",
            "hoodie.indexing",
            "hoodie.archival",
            "hoodie.ttl",
            "hoodie.savepoint",
        ),
    ),
    ("registry", ("hoodie.registry",)),
    ("testing", ("hoodie.testing",)),
    ("daemon", ("hoodied",)),
)

#: Modules allowed to import inside functions, and why.
LAZY_IMPORTS = {
    "hoodie": "``from hoodie import Table`` without loading the whole library for a submodule's import",
    "hoodied.cli": "each command loads what it runs: ``hoodied --version`` and ``--help`` start in a blink",
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module of ours
    line: int
    in_function: bool


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _ours(name: str, known: dict[str, Path]) -> str | None:
    """The module of ours that ``name`` (a module, or a module's attribute) is, or ``None``."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(known: dict[str, Path]) -> Iterator[Import]:
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        yield from _walk(tree, module, known, in_function=False)


def _walk(node: ast.AST, module: str, known: dict[str, Path], *, in_function: bool) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif child.module and not child.level:
                names = [f"{child.module}.{a.name}" for a in child.names]
            else:
                names = []
            for name in names:
                target = _ours(name, known)
                if target is not None and target != module:
                    yield Import(module, target, child.lineno, in_function)
            continue
        inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        yield from _walk(child, module, known, in_function=inner)


def layer_of(module: str) -> int:
    best, where = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, where = len(prefix), i
    if where < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (and the README's Layout)")
    return where


KNOWN = modules()
IMPORTS = list(imports(KNOWN))


def test_every_module_has_a_layer() -> None:
    for module in KNOWN:
        layer_of(module)


def test_no_import_runs_up_the_layers() -> None:
    wrong = [
        f"{i.module} ({LAYERS[layer_of(i.module)][0]}) imports {i.target} ({LAYERS[layer_of(i.target)][0]}), "
        f"line {i.line}"
        for i in IMPORTS
        if layer_of(i.target) > layer_of(i.module)
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {m: set() for m in KNOWN}
    for i in IMPORTS:
        if not i.in_function:
            graph[i.module].add(i.target)
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = [*path[path.index(n) :], n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_no_function_level_import_hides_a_dependency() -> None:
    hidden = [
        f"{i.module} imports {i.target} inside a function, line {i.line}"
        for i in IMPORTS
        if i.in_function and i.module not in LAZY_IMPORTS
    ]
    assert not hidden, "\n".join(hidden)


def test_the_checks_see_what_they_check() -> None:
    """The walk finds imports at all levels (a guard against a check that passes by seeing nothing)."""
    assert len(IMPORTS) > 500
    assert any(i.in_function for i in IMPORTS if i.module == "hoodied.cli")
    assert (
        layer_of("hoodie.compaction.plan") > layer_of("hoodie.table") > layer_of("hoodie.timeline.timeline")
    )
    assert layer_of("hoodie.timeline.writer") > layer_of("hoodie.timeline.metadata")
