"""The package's shape: no import cycle, no reach into another object's private members,
the library core free of the applications, modules of a readable size."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = (("mindspore_rl_buffer", "mindspore_rl_buffer"), ("ops", "mindspore_rl_buffer.ops"))


def modules() -> dict[str, pathlib.Path]:
    """Every module of the installed package by its dotted name (``ops/`` is ``mindspore_rl_buffer.ops``)."""
    found = {}
    for folder, package in PACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            parts = [part for part in path.relative_to(ROOT / folder).with_suffix("").parts if part != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports at its top level or in functions (absolute imports)."""
    found = modules()
    graph = {name: set() for name in found}
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target in found and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def test_no_import_cycle():
    graph, state, cycles = import_graph(), {}, []

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append([*stack[stack.index(target):], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, cycles


def test_no_reach_into_another_objects_private_members():
    """``x._name`` only on ``self``/``cls``, or on a class of the package to call a hook of its base."""
    classes = {node.name for path in modules().values() for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ClassDef)}
    reaches = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and (owner.id in ("self", "cls") or owner.id in classes):
                continue
            if ast.unparse(node) == "sys._getframe":
                continue
            reaches.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert not reaches, reaches


def test_the_library_core_imports_no_application():
    apps = [name for name, targets in import_graph().items()
            if not name.startswith("mindspore_rl_buffer.apps") and name != "mindspore_rl_buffer.__main__"
            and any(target.startswith("mindspore_rl_buffer.apps") for target in targets)]
    assert not apps, apps
    script = ("import sys, mindspore_rl_buffer; "
              "print(sorted(m for m in sys.modules if m.startswith('mindspore_rl_buffer.apps')))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_no_module_is_over_about_400_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 420}
    assert not long, long
