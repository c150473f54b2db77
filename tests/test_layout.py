"""The package's imports run one way: a module imports its own folder or a floor below it, the features a user names
(gate, watch, bisect, history, site) never import one another, and nothing imports in a circle. Read from the code's
own import statements (docs/architecture.md draws the floors)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sgemm"
# From the ground up; a room is a folder of the package, or a module at its top.
FLOORS = [
    {"catalogue", "kernel_table", "git", "atomic", "writable", "words", "gpu", "peak", "figures", "style",
     "sourcetree", "contained"},
    {"measuring"},
    {"results"},
    {"rounds"},
    {"gate", "watch", "bisect", "history", "site"},
    {"commands"},
    {"cli"},
    {"__main__"},
]
FEATURES = FLOORS[4]


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor_of(room: str) -> int:
    return next(index for index, rooms in enumerate(FLOORS) if room in rooms)


def imports() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports, anywhere in it."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    found: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                names = [f"{base}.{alias.name}" for alias in node.names]
                targets |= {name for name in names if name in modules} or ({base} & modules.keys())
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name in modules}
        found[module] = {target for target in targets if target != module and target != "sgemm"}
    return found


def test_every_room_stands_on_a_floor():
    rooms = {room_of(module) for module in imports()} - {"__init__"}
    assert not rooms - set().union(*FLOORS), "give each new folder or top-level module its floor in FLOORS"


def test_no_import_climbs_a_floor():
    climbing = [f"{module} imports {target}" for module, targets in imports().items() for target in targets
                if room_of(module) != "__init__" and room_of(target) != room_of(module)
                and floor_of(room_of(target)) >= floor_of(room_of(module))
                and not floor_of(room_of(module)) == floor_of(room_of(target)) == 0]
    assert not climbing, "imports against the data flow:\n" + "\n".join(climbing)


def test_no_feature_imports_another():
    crossing = [f"{module} imports {target}" for module, targets in imports().items() for target in targets
                if room_of(module) in FEATURES and room_of(target) in FEATURES and room_of(module) != room_of(target)]
    assert not crossing, "features import one another:\n" + "\n".join(crossing)


def test_no_module_imports_in_a_circle():
    graph = imports()
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            pytest.fail("imports in a circle: " + " -> ".join([*trail[trail.index(module):], module]))
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, [*trail, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


@pytest.mark.parametrize("check", [test_no_import_climbs_a_floor, test_no_feature_imports_another,
                                   test_no_module_imports_in_a_circle])
def test_each_check_finds_what_it_guards_against(check, monkeypatch):
    """Each check fails on the import it exists to refuse, added to the package's real graph."""
    planted = {test_no_import_climbs_a_floor: ("sgemm.measuring.record", "sgemm.gate.run"),
               test_no_feature_imports_another: ("sgemm.site.publish", "sgemm.watch.notices"),
               test_no_module_imports_in_a_circle: ("sgemm.catalogue", "sgemm.gpu")}[check]
    real = imports()

    def with_planted():
        graph = {module: set(targets) for module, targets in real.items()}
        graph[planted[0]].add(planted[1])
        return graph

    monkeypatch.setitem(globals(), "imports", with_planted)
    with pytest.raises(pytest.fail.Exception if check is test_no_module_imports_in_a_circle else AssertionError):
        check()
