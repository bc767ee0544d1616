"""What the main job's first launch compiles, and where the time goes: ``python -m benchmarks.dqn_compile``.

The first launch of ``mindspore-rl-buffer train`` (``configs/dqn_nstep.py``, fused loop, no
compile cache) compiles the training graph, :class:`~mindspore_rl_buffer.apps.dqn.fused.TrainLoop`.
This script compiles that graph and each of its parts alone, every one in a fresh process
(MindSpore keeps parsed Python functions for the process's later compiles), for two trees: the
baseline commit (``--baseline``, checked out by ``git worktree``) and this checkout, alternating,
``--rounds`` times, each tree's processes set up as its ``train`` sets up its own before the first
compile. A part's compile time is its first call less its second (the run). The parts
(:data:`PARTS`) sit in a graph ``while`` loop of their own, as they do in the training loop, so
``collect - act`` is the buffer's insert and ``learn - sample`` the two updates with their
branch. For the training graph it also splits the compile into MindSpore's pipeline actions (from
the ``PIPELINE`` module's log, at INFO level in processes of their own) and compiles it under the
MindSpore options that might shorten a compile (:data:`OPTIONS`). Once per tree it also counts the
training graph's size (:data:`SIZES`) in the IR files MindSpore writes with ``save_graphs``: the
function graphs and nodes type inference specializes, and what the graph passes leave of them.

``--smoke`` runs one round against this checkout itself, a tree's parts in one process (no
claims), and records nothing without ``--out``. The figures, with the run's provenance, go to
``DIR/dqn_compile.json`` (``--out DIR``, default ``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARK = "DQN_COMPILE "
BASELINE = "812a0ff"
BASE, NEW = "baseline", "candidate"
TREES = {BASE: "the baseline commit", NEW: "this checkout, its processes set up as its `train` sets them up"}
PARTS = {
    "empty": "a graph while loop adding a constant: the fixed cost of a compile",
    "act": "the epsilon-greedy policy, one step of 8 CartPoles, the episode returns",
    "collect": "act and the buffer's insert of the step (collect.CollectStep)",
    "sample": "sample(256) of the n-step buffer",
    "update": "one update of 128 given transitions: loss, gradients, Adam, target-sync branch",
    "learn": "the learn step: sample(256) and two updates under one call (learner.LearnStep)",
    "train_loop": "the training graph of the first launch (fused.TrainLoop): collect, then learn under a graph if",
    "evaluation": "the evaluation graph of the first evaluation (evaluation.EvalLoop)",
}
OPTIONS = {
    "default": "as train compiles it",
    "jit_level_O1": "TrainLoop.set_jit_config(JitConfig(jit_level='O1'))",
    "strict_syntax": "mindspore.set_context(jit_syntax_level=mindspore.STRICT)",
}
# A compile's time in parts: three pipeline actions by name, the other actions together, and the rest of the
# compile (Python-side parsing and resolution before the first action, the graph executor's set-up).
GROUPS = {"type_inference": "type inference", "optimize": "graph passes (optimize)",
          "task_emit": "backend: kernel graph and kernels (task_emit)", "other actions": "the other actions together",
          "outside the actions": "outside the actions: parsing the Python, the executor's set-up"}
_NAMED = ("type_inference", "optimize", "task_emit")
# The training graph's size at two stages of its compile: the IR file of each stage (the last compile's).
SIZES = {"type_inference": "after type inference: every function, method and ops wrapper the graph code calls, "
                           "specialized for the argument types of its calls",
         "validate": "after the graph passes (inlining, simplification): the graph the backend builds kernels from"}
_IR_FILE = re.compile(r"^\d+_(\w+?)_(\d+)\.ir$")
_IR_NODE = re.compile(r"^\s+%\d+\(", re.M)
_IR_GRAPHS = re.compile(r"^# Total subgraphs: (\d+)$", re.M)
# A function graph's header in an IR file, ``subgraph @<id>_<markers><name>_<id>(...`` or ``... parent: [...](``;
# the markers (a loop's ``↻``, a branch's ``✓`` / ``✗``, a nesting's ``2↓``, ...) and the numbers are dropped.
_IR_HEADER = re.compile(r"^subgraph @(\S+?)[( ]", re.M)
_IR_NAME = re.compile(r"^\d+_(?:\d|[^\w])*(.*?)(?:_\d+)?$")
FUNCTIONS = 12  # the functions listed per tree: those with the most nodes after type inference
_RECORD = re.compile(r"(\d\d):(\d\d):(\d\d)\.(\d{3})\.(\d{3}) .*Status record: (start|end) (\S+) action")


# -- the child: one compile -----------------------------------------------------------------------

def _graphs(agent: Any) -> dict[str, Any]:
    """A callable per part of :data:`PARTS`, taking the number of passes; each returns a tensor."""
    import mindspore as ms
    from mindspore import Tensor, nn

    class Repeat(nn.Cell):
        def __init__(self, kind: str, target: Any = None, batch: tuple = ()) -> None:
            super().__init__()
            self.kind, self.target, self.batch = kind, target, batch

        def construct(self, n):
            done, acc = Tensor(0, ms.int32), Tensor(0.0, ms.float32)
            while done < n:
                if self.kind == "empty":
                    acc = acc + 1.0
                elif self.kind == "sample":
                    acc = acc + self.target.sample(256)[2].sum()
                elif self.kind == "update":
                    acc = acc + self.target(*self.batch)
                elif self.kind in ("act", "collect"):  # the rewards
                    acc = acc + self.target()[2].sum()
                else:
                    acc = acc + self.target()
                done = done + 1
            return acc

    zero = Tensor(0, ms.int32)
    return {"empty": lambda: Repeat("empty"), "act": lambda: Repeat("act", agent.collector.act),
            "collect": lambda: Repeat("collect", agent.collector.step),
            "sample": lambda: Repeat("sample", agent.buffer),
            "update": lambda: Repeat("update", agent.update, _batch(agent)),
            "learn": lambda: Repeat("learn", agent.learn),
            "train_loop": lambda: (lambda n: agent.train_loop(n, zero)),
            "evaluation": lambda: (lambda n: agent.eval_loop())}


def _batch(agent: Any) -> tuple:
    """128 transitions as the update takes them (vectors as columns), from the buffer's direct call."""
    from mindspore import Tensor

    columns = [x.asnumpy() for x in agent.buffer.sample(128)]
    return tuple(Tensor(x if x.ndim > 1 else x.reshape((-1, 1))) for x in columns)


def _fill(agent: Any, steps: int) -> None:
    """Store ``steps`` collect steps by direct calls of the buffer's insert (no graph of the parts compiled)."""
    import numpy as np
    from mindspore import Tensor

    rng = np.random.default_rng(0)
    envs = agent.collector.act.env.num_envs
    for _ in range(steps):
        agent.buffer.insert([Tensor(rng.normal(size=(envs, 4)).astype(np.float32)),
                             Tensor(rng.integers(0, 2, envs).astype(np.int32)), Tensor(np.ones(envs, np.float32)),
                             Tensor(np.zeros(envs, np.uint8)), Tensor(np.zeros(envs, np.uint8))])


def _clock(match: re.Match) -> float:
    hours, minutes, seconds, millis, micros = (int(x) for x in match.groups()[:5])
    return hours * 3600 + minutes * 60 + seconds + millis / 1e3 + micros / 1e6


def actions(log: str) -> dict[str, float]:
    """Seconds per pipeline action from MindSpore's ``Status record`` lines, summed over repeats of an action.

    Examples:
        >>> log = ("[INFO] PIPELINE(1):2026-01-01-10:00:00.100.000 [x] Status record: start optimize action.\\n"
        ...        "[INFO] PIPELINE(1):2026-01-01-10:00:00.350.500 [x] Status record: end optimize action.\\n")
        >>> actions(log)
        {'optimize': 0.2505}
    """
    started: dict[str, float] = {}
    total: dict[str, float] = {}
    for match in _RECORD.finditer(log):
        name, when = match.group(7), _clock(match)
        if match.group(6) == "start":
            started[name] = when
        elif name in started:
            total[name] = round(total.get(name, 0.0) + when - started.pop(name), 6)
    return total


def ir_size(text: str) -> dict[str, int]:
    """The function graphs and nodes of one of MindSpore's IR files.

    Examples:
        >>> ir_size("# Total subgraphs: 2\\nsubgraph @1_f() {\\n  %0(CNode_1) = Add(%a, %b)\\n"
        ...         "  %1(CNode_2) = Mul(%0, %b)\\n}\\nsubgraph @2_g() {\\n  %0(CNode_3) = Neg(%a)\\n}\\n")
        {'graphs': 2, 'nodes': 3}
    """
    graphs = _IR_GRAPHS.search(text)
    return {"graphs": int(graphs.group(1)) if graphs else 0, "nodes": len(_IR_NODE.findall(text))}


def ir_functions(text: str, top: int = FUNCTIONS) -> list[list[Any]]:
    """The ``top`` functions of one of MindSpore's IR files with the most nodes: ``[name, graphs, nodes]`` each,
    the function graphs of one Python function (its specializations, loop bodies and branches) taken together.

    Examples:
        >>> ir_functions("subgraph @1_f_7(%x) {\\n  %0(CNode_1) = Add(%x, %x)\\n  %1(CNode_2) = Neg(%0)\\n}\\n"
        ...              "subgraph @4_↻f_9 parent: [subgraph @1_f_7](%y) {\\n  %0(CNode_3) = Neg(%y)\\n}\\n"
        ...              "subgraph @2_g_8() {\\n  %0(CNode_4) = Neg(%a)\\n}\\nsubgraph @6_✓↱2↓g_3() {\\n}\\n")
        [['f', 2, 3], ['g', 2, 1]]
    """
    found: dict[str, list[int]] = {}
    headers = list(_IR_HEADER.finditer(text))
    for header, following in zip(headers, [*headers[1:], None]):
        body = text[header.end():following.start() if following else len(text)]
        match = _IR_NAME.match(header.group(1))
        counts = found.setdefault(match.group(1) if match else header.group(1), [0, 0])
        counts[0] += 1
        counts[1] += len(_IR_NODE.findall(body))
    ranked = sorted(found.items(), key=lambda item: (-item[1][1], item[0]))
    return [[name, graphs, nodes] for name, (graphs, nodes) in ranked[:top]]


def graph_sizes(folder: Path) -> dict[str, dict[str, Any]]:
    """:func:`ir_size` of the last compile's IR file of each stage of :data:`SIZES` in ``folder``, and after type
    inference the functions with the most nodes (:func:`ir_functions`)."""
    last: dict[str, tuple[int, Path]] = {}
    for file in folder.iterdir():
        match = _IR_FILE.match(file.name)
        if match and match.group(1) in SIZES and int(match.group(2)) >= last.get(match.group(1), (-1, file))[0]:
            last[match.group(1)] = (int(match.group(2)), file)
    sizes: dict[str, dict[str, Any]] = {}
    for stage in SIZES:
        if stage in last:
            text = last[stage][1].read_text(errors="replace")
            sizes[stage] = ir_size(text)
            if stage == "type_inference":
                sizes[stage]["functions"] = ir_functions(text)
    return sizes


@contextlib.contextmanager
def _stderr_to(file: Any) -> Iterator[None]:
    """File descriptor 2, where MindSpore's log goes, into ``file`` for the block (``None``: left alone)."""
    if file is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def child(parts: list[str], option: str, phases: bool, setup: bool, sizes: bool = False) -> dict[str, Any]:
    """This process's tree: the compile seconds of each of ``parts`` in turn (under ``option``), and with
    ``phases`` their actions; with ``setup``, after what this checkout's ``train`` does before its first graph
    (the runtime threads, the objects of the imports frozen out of the garbage collections MindSpore runs before
    each compile); with ``sizes``, the graph's size (:func:`graph_sizes`; writing the IR files slows that
    compile). A part after the first compiles in a process that has parsed the earlier ones' functions: the
    measured runs give each part a process of its own, and only a smoke run shares one."""
    import gc

    import mindspore as ms
    from mindspore import Tensor

    ms.set_context(mode=ms.GRAPH_MODE)
    ir_folder = tempfile.TemporaryDirectory(prefix="dqn_compile_ir_") if sizes else None
    if ir_folder is not None:
        ms.set_context(save_graphs=1, save_graphs_path=ir_folder.name)
    if setup:
        from mindspore_rl_buffer.apps.dqn.runtime import pipeline_cpu_runtime

        pipeline_cpu_runtime()
        gc.freeze()
    if option == "strict_syntax":
        ms.set_context(jit_syntax_level=ms.STRICT)
    from mindspore_rl_buffer.configs.dqn_nstep import algorithm_config as config

    import mindspore_rl_buffer
    from mindspore_rl_buffer.apps.dqn.agent import build_agent

    agent = build_agent(config, "device", "mindspore", 0)
    if {"sample", "update", "learn"} & set(parts):
        _fill(agent, config["trainer"]["learning_starts"] // config["environment"]["num_envs"] + 5)
    if option == "jit_level_O1":
        agent.train_loop.set_jit_config(ms.JitConfig(jit_level="O1"))
    graphs, one = _graphs(agent), Tensor(1, ms.int32)
    figures: dict[str, Any] = {"package": mindspore_rl_buffer.__file__, "parts": {}}
    for part in parts:
        graph = graphs[part]()
        with tempfile.TemporaryFile(mode="w+") as log:
            with _stderr_to(log if phases else None):
                start = time.perf_counter()
                graph(one).asnumpy()
                first = time.perf_counter() - start
            start = time.perf_counter()
            graph(one).asnumpy()
            again = time.perf_counter() - start
            measured: dict[str, Any] = {"package": mindspore_rl_buffer.__file__, "compile_s": first - again,
                                        "first_s": first}
            if phases:
                log.seek(0)
                measured["actions"] = actions(log.read())
        figures["parts"][part] = measured
    figures["modules"] = {name: module.__file__ for name, module in sys.modules.items()
                          if name.partition(".")[0] == "mindspore_rl_buffer" and module.__file__}
    if ir_folder is not None:
        figures["sizes"] = graph_sizes(Path(ir_folder.name))
        ir_folder.cleanup()
    return figures


def spawn(root: Path, parts: list[str], option: str = "default", phases: bool = False, setup: bool = True,
          sizes: bool = False) -> dict[str, Any]:
    """:func:`child` in a fresh process importing the tree ``root`` (compile cache off); ``setup`` for this
    checkout, whose ``train`` sets up the process before compiling (the baseline's did not). The figures of
    each part by name under ``"parts"``, with the graph's sizes under ``"sizes"`` when asked."""
    from benchmarks.common import run_in_tree

    env = {"MSRB_COMPILE_CACHE": "off"}
    if phases:
        env.update({"GLOG_v": "3", "MS_SUBMODULE_LOG_v": "{PIPELINE:1}", "GLOG_logtostderr": "1"})
    return run_in_tree(Path(__file__).resolve(), root,
                       [*(arg for part in parts for arg in ("--part", part)), "--option", option,
                        *(["--phases"] if phases else []), *(["--setup"] if setup else []),
                        *(["--sizes"] if sizes else [])],
                       MARK, 15 * 60, env)


# -- the parent: rounds, medians, the record ------------------------------------------------------

def group(actions_s: dict[str, float], compile_s: float) -> dict[str, float]:
    """A compile's seconds by :data:`GROUPS`: three actions by name, the others together, the time outside them.

    Examples:
        >>> group({"type_inference": 1.0, "optimize": 0.25, "auto_monad": 0.05}, 1.5)
        {'type_inference': 1.0, 'optimize': 0.25, 'task_emit': 0.0, 'other actions': 0.05, 'outside the actions': 0.2}
    """
    out = {name: actions_s.get(name, 0.0) for name in _NAMED}
    out["other actions"] = round(sum(actions_s.values()) - sum(out.values()), 6)
    out["outside the actions"] = round(compile_s - sum(actions_s.values()), 6)
    return out


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds: each tree's compile seconds per part, the candidate's over the baseline's (the
    median of the rounds' ratios), the training graph's actions per tree, and its compile under each option."""
    parts = {}
    for part in PARTS:
        entry: dict[str, Any] = {tree: statistics.median(r["parts"][tree][part]["compile_s"] for r in rounds)
                                 for tree in (BASE, NEW)}
        entry["ratio"] = statistics.median(r["parts"][NEW][part]["compile_s"] / r["parts"][BASE][part]["compile_s"]
                                           for r in rounds)
        parts[part] = entry
    phases = {}
    for tree in (BASE, NEW):
        grouped = [group(r["phases"][tree]["actions"], r["phases"][tree]["compile_s"]) for r in rounds]
        phases[tree] = {name: statistics.median(g[name] for g in grouped) for name in grouped[0]}
        phases[tree]["compile_s"] = statistics.median(r["phases"][tree]["compile_s"] for r in rounds)
    options = {name: {"compile_s": statistics.median(r["options"][name]["compile_s"] for r in rounds),
                      "ratio": statistics.median(r["options"][name]["compile_s"] / r["parts"][NEW]["train_loop"]
                                                 ["compile_s"] for r in rounds)}
               for name in OPTIONS if name != "default"}
    return {"parts": parts, "phases": phases, "options": options}


def report(results: dict[str, Any]) -> str:
    from benchmarks.report import section_dqn_compile

    return "\n\n".join(section_dqn_compile(results, {}))


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="processes per part and tree, alternating (default: 3)")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit of the baseline (default: {BASELINE})")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--smoke", action="store_true", help="one round, this checkout as the baseline")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=tuple(PARTS), action="append", help=argparse.SUPPRESS)
    parser.add_argument("--option", choices=tuple(OPTIONS), default="default", help=argparse.SUPPRESS)
    parser.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # the tree on PYTHONPATH, not this folder's modules
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
        print(MARK + json.dumps(child(args.part, args.option, args.phases, args.setup, args.sizes)), flush=True)
        return None
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from benchmarks.common import checkout, commit_of, finish, provenance, results_path

    run = provenance(argv)
    if args.smoke:
        args.rounds = 1
    path = results_path("dqn_compile", args.out, args.smoke)
    started = time.perf_counter()
    rounds = []
    with checkout(None if args.smoke else args.baseline, root) as base_root:
        trees = {BASE: base_root, NEW: root}
        for number in range(args.rounds):
            measured: dict[str, Any] = {"parts": {BASE: {}, NEW: {}}, "phases": {}, "options": {}}
            if args.smoke:  # every part in one process per tree: the code of each, no claims
                for tree, tree_root in trees.items():
                    measured["parts"][tree] = spawn(tree_root, list(PARTS), setup=tree == NEW)["parts"]
            else:
                for part in PARTS:
                    for tree, tree_root in trees.items():
                        measured["parts"][tree][part] = spawn(tree_root, [part], setup=tree == NEW)["parts"][part]
            for tree, tree_root in trees.items():
                measured["phases"][tree] = spawn(tree_root, ["train_loop"], phases=True,
                                                 setup=tree == NEW)["parts"]["train_loop"]
            for option in OPTIONS:
                if option != "default":
                    measured["options"][option] = spawn(root, ["train_loop"], option)["parts"]["train_loop"]
            rounds.append(measured)
            print(f"round {number + 1} of {args.rounds}: {time.perf_counter() - started:.0f} s", flush=True)
        # The same graph in every process of a tree: its size once per tree.
        sizes = {tree: spawn(tree_root, ["train_loop"], setup=tree == NEW, sizes=True)["sizes"]
                 for tree, tree_root in trees.items()}
        resolved = commit_of(base_root)
    results = {"run": run, "config": "configs/dqn_nstep.py",
               "baseline": {"commit": "this checkout (smoke run)" if args.smoke else args.baseline,
                            "resolved": resolved},
               "parts_described": PARTS, "options_described": OPTIONS, "groups": GROUPS, "trees": TREES,
               "sizes_described": SIZES, "sizes": sizes, "rounds": rounds}
    results["summary"] = summarize(rounds)
    return finish(results, path, report(results), started)


if __name__ == "__main__":
    main()
