"""The rooms of mhe/ (docs/mhe.md): every import, lazy and type-only ones included, goes down the room order or
stays in its room, and no module imports itself round a circle."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mhe"

FLOOR = {"models": 0, "data": 1, "estimator": 2, "identification": 3, "outer": 3, "problems": 4, "peers": 4,
         "pem": 4, "scoring": 4, "training": 5}
"""The room order of docs/mhe.md: a module imports only from its own room or from a room on a lower floor; two
rooms on one floor do not import each other."""


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (``mhe.models.model``; a package by its own name)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = ("mhe",) + path.relative_to(package).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The mhe modules that ``name`` imports anywhere in its file (top level, in functions, under TYPE_CHECKING)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets |= {f"{base}.{a.name}" for a in node.names} | {base}
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def room(name: str) -> str:
    """The room of a module: its folder under mhe/, or the module itself at the top."""
    return name.split(".")[1]


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items() if name != "mhe"}


def upward(edges: dict[str, set[str]]) -> list[str]:
    """The imports that do not go down the room order or stay in one room; ``mhe`` itself, the front door that
    exports every room's names, stands above all rooms."""
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                  if b == "mhe" or (room(a) != room(b) and not FLOOR[room(a)] > FLOOR[room(b)]))


def circle(edges: dict[str, set[str]]) -> list[str]:
    """One import circle among the modules (the modules round it), or [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_every_module_sits_in_a_room_of_the_order():
    assert {room(name) for name in graph()} == set(FLOOR)


def test_no_import_goes_up_the_room_order():
    assert upward(graph()) == []


def test_no_import_circle():
    assert circle(graph()) == []


def test_the_rooms_stand_on_at_most_six_floors():
    assert max(FLOOR.values()) + 1 <= 6


def test_the_check_sees_an_arrow_back_up_and_a_circle(tmp_path):
    for rel, text in {"__init__.py": "", "identification.py": "from .models.model import X\n",
                      "models/__init__.py": "", "models/model.py": "def f():\n    from ..data.logs import Y\n",
                      "data/__init__.py": "", "data/logs.py": "from ..models import model\nfrom .. import Z\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    edges = graph(tmp_path)
    assert upward(edges) == ["mhe.data.logs -> mhe", "mhe.models.model -> mhe.data.logs"]
    assert circle(edges) == ["mhe.data.logs", "mhe.models.model", "mhe.data.logs"]


def test_the_parser_follows_relative_imports_to_the_module():
    edges = graph()
    assert {"mhe.identification", "mhe.models.pendulum", "mhe.data.recording"} <= edges["mhe.problems.pendulum"]
    assert "mhe.pem" in edges["mhe.training.module"]
