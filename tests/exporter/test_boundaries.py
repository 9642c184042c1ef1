"""The exporter's boundaries (issue 37): it never imports the daemon (the daemon builds its site
from the exporter's own settings), and its modules and public classes have names no other
package of uwsgitune uses, so that `grep` finds one thing."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "uwsgitune"
EXPORTER = PACKAGE / "exporter"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _classes(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


def test_the_exporter_never_imports_the_daemon() -> None:
    wrong = [
        f"{p.name} imports {m}"
        for p in sorted(EXPORTER.glob("*.py"))
        for m in _imports(p)
        if m == "uwsgitune.daemon" or m.startswith("uwsgitune.daemon.")
    ]
    assert not wrong, wrong


def test_exporter_module_names_are_used_in_no_other_package() -> None:
    others = {p.name for p in PACKAGE.rglob("*.py") if p.parent != EXPORTER}
    mine = {p.name for p in EXPORTER.glob("*.py")} - {"__init__.py"}
    assert not mine & others, sorted(mine & others)


def test_exporter_public_classes_are_named_as_no_other_class() -> None:
    others: set[str] = set()
    for p in PACKAGE.rglob("*.py"):
        if p.parent != EXPORTER:
            others |= _classes(p)
    mine = {c for p in EXPORTER.glob("*.py") for c in _classes(p) if not c.startswith("_")}
    assert not mine & others, sorted(mine & others)
