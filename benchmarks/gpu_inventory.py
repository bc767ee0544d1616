"""Which primitives, with which input dtypes, the library's graphs use; held against MindSpore 2.10's GPU kernels.

Runs every scenario of :mod:`benchmarks.gpu_scenarios` in a child process under MindSpore's IR
dump (``MS_DEV_SAVE_GRAPHS=1``, only the ``hwopt_common_final_graph`` pass: each compiled
kernel graph after the backend's common passes, with the op expanders applied, so each node
names the kernel that will run), reads every node's primitive and the dtypes of its tensor
inputs, and checks each pair against ``docs/gpu/kernels-2.10.0.json``: the input dtypes that
MindSpore 2.10.0's GPU kernels register (docs/platforms.md, "The GPU kernel table", says how it was read).

    python -m benchmarks.gpu_inventory                # every scenario; exit 1 if a pair is unsupported
    python -m benchmarks.gpu_inventory --json out.json --scenarios replay_buffer priority

The comparison uses the tensor inputs only: scalar and tuple inputs (axes, shapes, flags) are
attributes of the graph, not data, and every kernel of the table registers them as Int64.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "gpu" / "kernels-2.10.0.json"
DUMP_PASS = "hwopt_common_final_graph"

_NODE = re.compile(r"^  %\d+\([^)]*\) = ([A-Za-z_][A-Za-z0-9_]*)\(")
_TENSOR = re.compile(r"^<(?:Ref\[)?Tensor\[(\w+)\]")
_SCALAR = re.compile(r"^<(Bool|U?Int\d+|Float\d+), NoShape>")
_TUPLE = re.compile(r"^<Tuple\[(\w+)")


def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside any bracket: the items of an IR type list."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<([{":
            depth += 1
        elif char in ">)]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return [*items, tail] if tail else items


def input_tokens(type_line: str) -> tuple[str, ...]:
    """A node's inputs, from its IR type line ``: (<...>, ...) -> (...)``, in the table's notation.

    A tensor is its dtype (``Float32``; ``Int64@Const`` if its value is fixed in the graph), a
    scalar ``Int64@Number``, a tuple its element dtype ``Int64@Tuple``, an absent optional input
    ``None``; monads and strings are left out (they are not data).
    """
    inputs = type_line.strip()[1:].strip()
    inputs = inputs[1:inputs.rindex(") -> (")] if ") -> (" in inputs else inputs[1:-1]
    tokens = []
    for item in split_top_level(inputs):
        if match := _TENSOR.match(item):
            tokens.append(match.group(1) + ("@Const" if "value=" in item else ""))
        elif match := _SCALAR.match(item):
            tokens.append(match.group(1) + "@Number")
        elif match := _TUPLE.match(item):
            tokens.append(match.group(1) + "@Tuple")
        elif item.startswith("<None"):
            tokens.append("None")
    return tuple(tokens)


def parse_ir(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Every ``(primitive, inputs)`` of one IR dump file, in order (see :func:`input_tokens`).

    Examples:
        >>> from benchmarks.gpu_inventory import parse_ir
        >>> ir = \'\'\'  %2(CNode_736) = PrimFunc_Add(%0, %1) primitive_attrs: {}
        ...       : (<Tensor[Int32], ()>, <Ref[Tensor[Int32]], (), ref_key=count>) -> (<Tensor[Int32], ()>)
        ...   %3(CNode_7) = UniformInt(%2, Tensor(shape=[], dtype=Int32, value=0), %1)
        ...       : (<Tuple[Int64*1], TupleShape(NoShape)>, <Tensor[Int32], (), value=...>, <UMonad, NoShape>)
        ...         -> (<Tensor[Int32], (4)>)
        ... \'\'\'
        >>> parse_ir(ir)
        [('Add', ('Int32', 'Int32')), ('UniformInt', ('Int64@Tuple', 'Int32@Const'))]
    """
    nodes, primitive = [], None
    for line in text.splitlines():
        match = _NODE.match(line)
        if match:
            primitive = match.group(1).removeprefix("PrimFunc_")
        elif primitive is not None and line.lstrip().startswith(": ("):
            nodes.append((primitive, input_tokens(line)))
            primitive = None
    return nodes


def collect(dump_dir: Path) -> dict[str, list[list[str]]]:
    """``{primitive: sorted unique tensor-input dtype lists}`` over every dumped graph in ``dump_dir``."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for path in sorted(dump_dir.rglob(f"{DUMP_PASS}_*.ir")):
        for primitive, dtypes in parse_ir(path.read_text(errors="replace")):
            found.setdefault(primitive, set()).add(dtypes)
    return {primitive: [list(d) for d in sorted(found[primitive])] for primitive in sorted(found)}


def child_env(**extra: str) -> dict[str, str]:
    """This environment, with the project's root first on ``PYTHONPATH`` and ``extra`` set: a child's."""
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, **extra}


def run_scenario(name: str, dump_dir: Path) -> dict[str, list[list[str]]]:
    """Run one scenario in a child process under the IR dump; return what its graphs use."""
    env = child_env(MS_DEV_SAVE_GRAPHS="1", MS_DEV_SAVE_GRAPHS_PATH=str(dump_dir), MS_DEV_DUMP_IR_PASSES=DUMP_PASS)
    child = subprocess.run([sys.executable, "-m", "benchmarks.gpu_inventory", "--child", name], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=False)
    if child.returncode != 0:
        raise RuntimeError(f"scenario {name!r} failed:\n{child.stdout[-3000:]}\n{child.stderr[-3000:]}")
    return collect(dump_dir)


def inventory(names: Iterable[str]) -> dict[str, dict[str, list[list[str]]]]:
    """``{scenario: {primitive: dtype lists}}`` for the scenarios ``names``."""
    result = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"ir-{name}-") as dump_dir:
            result[name] = run_scenario(name, Path(dump_dir))
    return result


def load_table(path: Path = TABLE) -> dict[str, Any]:
    """The committed GPU kernel table (``docs/gpu/kernels-2.10.0.json``)."""
    return json.loads(path.read_text())


def _base(token: str) -> str:
    return token.split("@")[0]


def _is_tensor(token: str) -> bool:
    return "@" not in token or token.endswith("@Const")


def matches(inputs: list[str], signature: list[str]) -> bool:
    """Whether a node's ``inputs`` select a kernel registered with ``signature`` (both as tokens).

    Positions compare by dtype: MindSpore's backend turns a constant tuple into a tensor input
    and back as a kernel asks, and an absent optional input (``None``) fits any. Failing
    that, the tensor inputs alone compare, after the constant ones a kernel takes as
    attributes (a legacy kernel's axis, ``Cast``'s target type) are dropped from the end.
    """
    if len(inputs) == len(signature) and all(i == "None" or _base(i) == _base(s) for i, s in zip(inputs, signature)):
        return True
    tensors = [i for i in inputs if _is_tensor(i)]
    while tensors and tensors[-1].endswith("@Const") and len(tensors) > len([s for s in signature if "@" not in s]):
        tensors.pop()
    return [_base(t) for t in tensors] == [s for s in signature if "@" not in s]


def supported(table: dict[str, Any], primitive: str, inputs: Iterable[str]) -> bool:
    """Whether MindSpore 2.10.0's GPU kernel of ``primitive`` accepts ``inputs`` (tokens of :func:`input_tokens`).

    Virtual nodes of the table (``Load``, ``MakeTuple``, ...: no kernel runs) accept anything,
    and so do kernels registered without input types (``Assert``) and the host nodes the table
    lists with the reason they are there (``PyExecute``).

    Examples:
        >>> from benchmarks.gpu_inventory import load_table, supported
        >>> table = load_table()
        >>> supported(table, 'ScatterUpdate', ['Float32', 'Int32', 'Float32'])
        True
        >>> supported(table, 'ScatterUpdate', ['Bool', 'Int32', 'Bool'])
        False
        >>> supported(table, 'NoSuchKernel', ['Float32'])
        False
    """
    if primitive in table["virtual"] or primitive in table["host"]:
        return True
    entry = table["primitives"].get(primitive)
    if entry is None:
        return False
    inputs = list(inputs)
    if any(not signature or matches(inputs, signature) for signature in entry["signatures"]):
        return True
    return any(matches_variadic(inputs, signature) for signature in entry.get("variadic_signatures", []))


def matches_variadic(inputs: list[str], signature: list[str]) -> bool:
    """Whether ``inputs`` fit a kernel registered with all-same inputs (``Concat``, ``Stack``, ``AddN``):
    any number of tensors of the signature's first dtype, then its remaining (scalar) inputs."""
    tensors = [_base(i) for i in inputs if _is_tensor(i)]
    rest = [_base(i) for i in inputs if not _is_tensor(i)]
    return bool(tensors) and set(tensors) == {signature[0]} and rest == [_base(s) for s in signature[1:]]


def unsupported(found: dict[str, dict[str, list[list[str]]]], table: dict[str, Any]) -> list[dict[str, Any]]:
    """Each ``(primitive, dtypes)`` of the inventory that the table does not list, with its scenarios."""
    flagged: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for scenario, primitives in found.items():
        for primitive, dtype_lists in primitives.items():
            for dtypes in dtype_lists:
                if not supported(table, primitive, dtypes):
                    flagged.setdefault((primitive, tuple(dtypes)), []).append(scenario)
    return [{"primitive": p, "dtypes": list(d), "scenarios": s} for (p, d), s in sorted(flagged.items())]


def report(found: dict[str, dict[str, list[list[str]]]], table: dict[str, Any], bad: list[dict[str, Any]]) -> str:
    """A short text report: what the graphs use, and ``bad``, what the GPU table does not list."""
    pairs = {(p, tuple(d)) for primitives in found.values() for p, lists in primitives.items() for d in lists}
    kernels = {p for p, _ in pairs if p not in table["virtual"] and p not in table["host"]}
    lines = [f"scenarios: {', '.join(found)}",
             f"{len(kernels)} primitives with kernels, {len(pairs)} (primitive, input dtypes) pairs"]
    if not bad:
        lines.append(f"every pair is registered by MindSpore {table['mindspore']}'s GPU kernels")
    for row in bad:
        where = ", ".join(row["scenarios"])
        lines.append(f"NOT REGISTERED on GPU: {row['primitive']}{tuple(row['dtypes'])} in {where}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.gpu_scenarios import SCENARIOS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", choices=sorted(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--json", help="write the inventory and the unsupported pairs here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        import mindspore as ms

        ms.set_context(mode=ms.GRAPH_MODE)
        ms.set_device("CPU")
        SCENARIOS[args.child]()
        return 0
    found = inventory(args.scenarios)
    table = load_table()
    bad = unsupported(found, table)
    print(report(found, table, bad))
    if args.json:
        Path(args.json).write_text(json.dumps({"inventory": found, "unsupported": bad}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
