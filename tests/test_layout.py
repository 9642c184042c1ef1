"""The layout the project keeps: imports go one way, down a list of layers, and never in a
cycle; no reach outside the repository from the tests. Module size is not tested: a module
holds one idea its name says (ARCHITECTURE.md), and a line limit enforced by a test cut
modules where the ideas do not divide.

Every import counts: at the top of a module, inside a function (a lazy import is still a
dependency, only a later one), under `TYPE_CHECKING` (the type checker follows it), and
`importlib.import_module` of a literal name. `from a.b import c` is an import of the module
`a.b.c` when there is one, else of `a.b`.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from functools import cache
from pathlib import Path

Graph = dict[str, frozenset[str]]
ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "uwsgitune"

# The packages (and top-level modules) in the order data flows through them: a layer imports
# only from its own layer and the ones before it. The pure core first; then the I/O shell's
# leaves (reading stats, writing files, signals, the load generator and the launcher of our
# own uWSGI, and the sampling hook uWSGI itself imports); the pipeline that runs one poll;
# the actuator that applies the tuner's decision; the views; the exporter; the programs
# built from them; the command line.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("uwsgitune", "errors"),  # __init__.py (the version), the one error base
    ("core",),
    ("rules",),
    ("tuner",),  # the tuner reads the rules' findings to decide `listen`
    ("sources", "nofollow", "stopsignals", "keepalive", "loadgen", "launch", "uwsgi_sample"),
    ("pipeline",),
    ("actuate",),
    ("render",),
    ("exporter",),
    ("tui", "daemon", "sweep", "demo"),
    ("cli", "__main__"),
)

# Import cycles being removed by others right now. The list only shrinks: the test fails when
# a cycle appears that is not here, and when one here is gone (delete its line then).
KNOWN_CYCLES: frozenset[str] = frozenset()  # every cycle issue 37 found is gone


def _name(path: Path) -> str:
    """`uwsgitune/cli/tune.py` -> `uwsgitune.cli.tune` (a package: its `__init__.py`)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(tree: ast.AST) -> Iterator[str]:
    """Every name imported anywhere in the tree, submodules resolved as described above."""
    modules = _modules()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield sub if sub in modules else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            f = node.func
            if getattr(f, "attr", getattr(f, "id", None)) == "import_module":
                yield str(node.args[0].value)


@cache
def _graph() -> Graph:
    """module -> the modules of the package it imports."""
    modules, graph = _modules(), {}
    for name, path in modules.items():
        found = set()
        for target in _imported(ast.parse(path.read_text())):
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]  # `import uwsgitune.x.y` of a name in x
            if target in modules and target != name:
                found.add(target)
        graph[name] = frozenset(found)
    return graph


def _unit(module: str) -> str:
    """The layer member a module belongs to: its package, or itself at the top level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _shown(module: str) -> str:
    path = _modules()[module].relative_to(PACKAGE)
    return path.as_posix()


def _shown_unit(unit: str) -> str:
    if (PACKAGE / unit).is_dir():
        return f"{unit}/"
    return "__init__.py" if unit == PACKAGE.name else f"{unit}.py"


@cache
def _unit_graph() -> tuple[Graph, dict[tuple[str, str], str]]:
    """Layer member -> the members it imports; and one import that makes each such edge."""
    graph: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], str] = {}
    for a, targets in _graph().items():
        for b in sorted(targets):
            ua, ub = _unit(a), _unit(b)
            if ua != ub:
                graph.setdefault(ua, set()).add(ub)
                witness.setdefault((ua, ub), f"{_shown(a)} imports {_shown(b)}")
    return {k: frozenset(v) for k, v in graph.items()}, witness


def _tangles(graph: Graph) -> list[frozenset[str]]:
    """The strongly connected sets of more than one node (Tarjan): every cycle lies in one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            tangle: set[str] = set()
            while not tangle or v not in tangle:
                tangle.add(stack.pop())
            if len(tangle) > 1:
                out.append(frozenset(tangle))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _cycles(graph: Graph, limit: int = 200) -> list[list[str]]:
    """The elementary cycles of `graph` (at most `limit`), each from its least node: from each
    node of a tangle in order, every path through greater nodes of it back to the first."""
    found: list[list[str]] = []

    def walk(tangle: frozenset[str], path: list[str]) -> None:
        for nxt in sorted(graph[path[-1]] & tangle):
            if len(found) >= limit:
                return
            if nxt == path[0]:
                found.append([*path, nxt])
            elif nxt > path[0] and nxt not in path:
                walk(tangle, [*path, nxt])

    for tangle in _tangles(graph):
        for start in sorted(tangle):
            walk(tangle, [start])
    return found


def _found_cycles() -> dict[str, str]:
    """Every import cycle, named as `a.py -> b.py -> a.py` (between packages: `a/ -> b/ ->
    a/`), with the imports that close it."""
    out = {}
    for cycle in _cycles(_graph()):
        out[" -> ".join(_shown(m) for m in cycle)] = "modules importing each other"
    units, witness = _unit_graph()
    for cycle in _cycles(units):
        name = " -> ".join(_shown_unit(u) for u in cycle)
        out[name] = "; ".join(witness[pair] for pair in itertools.pairwise(cycle))
    return out


def _between_packages(name: str) -> bool:
    return any(step.endswith("/") for step in name.split(" -> "))


def _hops(name: str) -> list[tuple[str, str]]:
    """The imports a cycle's name says: between packages when one of its steps is a `pkg/`
    (nodes of `_unit_graph`), else between modules (nodes of `_graph`)."""
    steps = name.split(" -> ")
    if _between_packages(name):
        by_shown = {_shown_unit(_unit(m)): _unit(m) for m in _modules()}
    else:
        by_shown = {_shown(m): m for m in _modules()}
    return list(itertools.pairwise(by_shown.get(step, step) for step in steps))


def test_every_package_has_a_layer() -> None:
    placed = {unit for layer in LAYERS for unit in layer}
    units = {_unit(m) for m in _modules()}
    assert units <= placed, f"place these in LAYERS (tests/test_layout.py): {units - placed}"


def test_imports_go_down_the_layers() -> None:
    """No module imports from a later layer than its own: the pure core never reaches the
    shell, the shell never the programs built on it, nothing the command line."""
    layer = {unit: n for n, members in enumerate(LAYERS) for unit in members}
    # the hops of a known cycle between packages are tolerated until it is removed
    tolerated = {hop for name in KNOWN_CYCLES if _between_packages(name) for hop in _hops(name)}
    wrong = []
    for a, targets in sorted(_graph().items()):
        for b in sorted(targets):
            ua, ub = _unit(a), _unit(b)
            if layer[ua] < layer[ub] and (ua, ub) not in tolerated:
                wrong.append(
                    f"{_shown(a)} imports {_shown(b)}: {_shown_unit(ua)} comes before "
                    f"{_shown_unit(ub)} in LAYERS"
                )
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    """Between packages and between modules: two modules (or packages) in a cycle cannot be
    read, tested or moved one without the other. The shortest new cycles are named first."""
    new = sorted(
        (name.count(" -> "), name, why)
        for name, why in _found_cycles().items()
        if name not in KNOWN_CYCLES
    )
    shown = [f"import cycle {name} ({why})" for _, name, why in new[:10]]
    more = [f"... and {len(new) - 10} more through the same imports"] if len(new) > 10 else []
    assert not new, "\n".join(shown + more)


def test_known_cycles_are_still_there() -> None:
    """KNOWN_CYCLES only shrinks: a cycle that was removed leaves the list with it."""
    gone = []
    for name in sorted(KNOWN_CYCLES):
        graph = _unit_graph()[0] if _between_packages(name) else _graph()
        if not all(b in graph.get(a, ()) for a, b in _hops(name)):
            gone.append(f"{name} is gone: delete it from KNOWN_CYCLES")
    assert not gone, "\n".join(gone)


def test_the_actuator_never_runs_the_rules() -> None:
    """The pipeline runs the rules, once per poll; the actuator reads their findings."""
    wrong = [
        f"{_shown(m)} imports rules/engine.py"
        for m, targets in _graph().items()
        if _unit(m) == "actuate" and "uwsgitune.rules.engine" in targets
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
FRAME_FACTORY = {"tests/support/instances.py", "tests/support/frames.py"}


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
    assert not built, f"build these frames with tests/support/frames.py or Instance: {built}"


# What drives a poll: reading a stats document, folding polls into frames, a driver's step.
# Only the pipeline (pipeline/: the driver) and its sources (sources/: how to read) may.
# Everyone else reads the states a driver publishes, or asks one for a poll (`fresh`,
# `poll_once`). Two reads of stats that are not polls of the instance are named here.
DRIVES_A_POLL = frozenset({"read_stats", "read_stats_from", "Tracker", "_step", "poll_in_step"})
NOT_A_POLL = {
    # the statuses alone, 20 times a second while a reload pauses the workers: a poll's frame
    # would go into the tuner's window (actuate/reload.py's docstring)
    ("actuate/reload.py", "read_stats"),
    # waits until a uWSGI it started itself answers (the demo, the tests)
    ("launch.py", "read_stats"),
}


def _names(path: Path) -> set[str]:
    """Every name a module uses: bare names, attributes, and names it imports."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            out.update(a.name for a in node.names)
    return out


def test_nothing_outside_the_pipeline_drives_a_poll() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.split("/")[0] in ("pipeline", "sources") or where == "core/derive.py":
            continue
        for name in sorted(_names(path) & DRIVES_A_POLL):
            if (where, name) not in NOT_A_POLL:
                wrong.append(f"{where} uses {name}: read the driver's states instead")
    assert not wrong, "\n".join(wrong)


# One name, one thing: a module's name finds one module with `grep` or a file search, and a
# class's name one class. The command line is the exception: `cli/<command>.py` is named
# after the command it adds (`cli/doctor.py` adds `uwsgitune doctor`, whose checks are in
# `actuate/doctor/`).


def _command_modules() -> set[str]:
    """The modules of cli/ that add a command of their own name (`sub.add_parser("name")`)."""
    out = set()
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "add_parser"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == path.stem
            ):
                out.add(_name(path))
    return out


def test_a_module_name_is_used_in_one_package() -> None:
    commands = _command_modules()
    by_name: dict[str, list[str]] = {}
    for module, path in _modules().items():
        if path.name != "__init__.py" and module not in commands:
            by_name.setdefault(path.stem, []).append(_shown(module))
    shared = [f"{name}: {', '.join(where)}" for name, where in by_name.items() if len(where) > 1]
    assert not shared, "rename one of each (a module name finds one module):\n" + "\n".join(shared)


def test_no_two_public_classes_share_a_name() -> None:
    by_name: dict[str, list[str]] = {}
    for module, path in _modules().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                by_name.setdefault(node.name, []).append(_shown(module))
    shared = [f"{name}: {', '.join(where)}" for name, where in by_name.items() if len(where) > 1]
    assert not shared, "rename one of each (a class name finds one class):\n" + "\n".join(shared)


def test_the_test_files_named_by_path_exist() -> None:
    """CPU_GROUP (tests/conftest.py) and FRAME_FACTORY name test files by path, NOT_CPU
    tests by path and name: a file moved or a test renamed without them would silently leave
    its group (or join it) or fail the frame check."""
    from tests.conftest import CPU_GROUP, NOT_CPU

    named = {f"tests/{p}" for p in CPU_GROUP} | FRAME_FACTORY
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"these paths name no file; update them: {missing}"
    for test in NOT_CPU:
        path, name = test.split("::")
        assert path in CPU_GROUP, f"{test}: its file is not in CPU_GROUP"
        tree = ast.parse((ROOT / "tests" / path).read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert name in defined, f"{test} names no test; update NOT_CPU"
