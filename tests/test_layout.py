"""The layout the project keeps: no reach outside the repository from the tests, and the
pipeline's one-way imports. Module size is not tested: a module holds one idea its name
says (ARCHITECTURE.md), and a line limit enforced by a test cut modules where the ideas
do not divide."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "uwsgitune"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_data_flows_one_way() -> None:
    """The pure core, rules and tuner never import the I/O shell or the sinks; the actuator
    never runs the rules (the pipeline does, once per poll)."""
    shell = ("uwsgitune.sources", "uwsgitune.actuate", "uwsgitune.pipeline", "uwsgitune.tui",
             "uwsgitune.exporter", "uwsgitune.daemon", "uwsgitune.cli")  # fmt: skip
    wrong = []
    for pkg in ("core", "rules", "tuner"):
        for p in (PACKAGE / pkg).rglob("*.py"):
            wrong += [
                f"{p.relative_to(ROOT)} imports {m}" for m in _imports(p) if m.startswith(shell)
            ]
    for p in (PACKAGE / "actuate").rglob("*.py"):
        wrong += [
            f"{p.relative_to(ROOT)} imports {m}"
            for m in _imports(p)
            if m == "uwsgitune.rules.engine"
        ]
    assert not wrong, wrong


def test_tests_stay_inside_the_repository() -> None:
    reach = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("*.py")
        if p != Path(__file__).resolve()
        and ('"shared"' in p.read_text() or "../shared" in p.read_text())
    ]
    assert not reach, f"tests reading outside the repository (use tests/data): {reach}"


# the test-frame factory: synthetic documents and host samples, fed through the real Tracker
FRAME_FACTORY = {"tests/observe/helpers.py", "tests/rules/frames.py"}


def test_test_frames_come_from_the_tracker() -> None:
    """A test frame is built by the real `Tracker` (the factory), never by hand: a hand-built
    `Frame(...)` can hold what no real poll gives, and drifts from real frames."""
    built = []
    for p in sorted((ROOT / "tests").rglob("*.py")):
        name = str(p.relative_to(ROOT))
        if name in FRAME_FACTORY:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if called == "Frame":
                    built.append(f"{name}:{node.lineno}")
    assert not built, f"build these frames with tests/rules/frames.py or Instance: {built}"
