"""The benchmark helpers measure what the benchmarks page says they measure.

Timing itself is never asserted (the benchmark is not a test); what is checked is that
the numpy baseline takes the very rows the buffer's sampler drew, and that comparisons
are taken round by round.
"""
import json
import math
import re

import mindspore as ms
import numpy as np
import pytest

from benchmarks.buffer_speed import drawn_rows, prefilled, sample_rows
from benchmarks.common import in_rounds, ratio
from mindspore_rl_buffer import ReplayBuffer


def test_the_numpy_baseline_takes_the_rows_the_sampler_drew():
    rb = ReplayBuffer(16, 10, [(2,), ()], [ms.float32, ms.int32])
    items = np.arange(13, dtype=np.int32)  # wraps: the oldest item (3) sits in row 3
    rb.insert([np.stack([items, -items], 1).astype(np.float32), items])
    columns = [column.asnumpy() for column in rb.columns]
    assert int(rb.head) == 3
    for _ in range(5):
        rows, values = sample_rows(rb)
        for column, value in zip(columns, values):
            np.testing.assert_array_equal(np.take(column, rows, axis=0), value.asnumpy())
    draws = drawn_rows(rb, 20)
    assert len(draws) == 20 and all(d.shape == (16,) and d.dtype.kind == "i" for d in draws)
    assert len({d.tobytes() for d in draws}) > 1  # fresh rows every call


def test_the_rows_drawn_from_a_partly_filled_buffer_are_stored_rows():
    rb = prefilled(6, [(3,)], [ms.float32], 64)
    bigger = ReplayBuffer(64, 50, [(3,)], [ms.float32])
    bigger.insert([rb.columns[0].asnumpy()])
    rows = np.concatenate(drawn_rows(bigger, 10))
    assert rows.min() >= 0 and rows.max() < 6
    assert set(rows.tolist()) == set(range(6))


def test_in_rounds_lets_the_calls_take_turns_and_ratio_compares_round_by_round():
    order = []
    calls = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    times = in_rounds(calls, repeats=12, rounds=3)
    assert {name: len(values) for name, values in times.items()} == {"a": 3, "b": 3}
    blocks = [order[i] for i in range(0, len(order)) if i == 0 or order[i] != order[i - 1]]
    assert blocks == ["a", "b"] * 3
    assert order.count("a") == order.count("b") == 3 * (20 + 4)  # warm-up, then the timed calls
    assert ratio({"x": [2.0, 4.0, 6.0], "y": [1.0, 1.0, 2.0]}, "x", "y") == 3.0


def test_the_solve_benchmark_summarizes_held_solves_per_variant():
    from benchmarks.common import summarize
    from benchmarks.dqn_solve import with_settings

    runs = [{"variant": "fused", "seed": s, "solved": s != 2, "solved_at": 1000 * (s + 1), "solve_time": 10.0 * (s + 1),
             "env_steps": 5000} for s in range(3)]
    summary = summarize(runs)["fused"]
    assert (summary["seeds"], summary["held"]) == (3, 2)
    assert (summary["median_steps"], summary["median_seconds"], summary["seconds"]) == ("1,500", "15.0", "10 / 20 / -")
    config = {"trainer": {"learn_steps_per_collect": 4}, "replay_buffer": {"sample_size": 64},
              "learner": {"target_sync_period": 100}}
    changed = with_settings(config, 1, 128, 250)
    assert changed["trainer"]["learn_steps_per_collect"] == 1 and config["trainer"]["learn_steps_per_collect"] == 4
    assert (changed["replay_buffer"]["sample_size"], changed["learner"]["target_sync_period"]) == (128, 250)
    config["learner"]["learning_rate"] = 2e-3
    assert with_settings(config, 4, 64, 100, learning_rate=1e-3)["learner"]["learning_rate"] == 1e-3
    assert with_settings(config, 4, 64, 100)["learner"]["learning_rate"] == 2e-3


def test_the_solve_benchmark_divides_seconds_seed_by_seed_and_counts_a_failure_as_its_wall_time():
    from benchmarks.dqn_solve import time_ratios

    def run(variant, seed, seconds, solved=True):
        return {"variant": variant, "seed": seed, "solved": solved, "solve_time": seconds if solved else None,
                "train_seconds": seconds + 1.0}

    runs = [run("base", 0, 20.0), run("base", 1, 40.0), run("base", 2, 30.0),
            run("fast", 0, 10.0), run("fast", 1, 10.0), run("fast", 2, 59.0, solved=False)]
    ratios = time_ratios(runs, "base")
    assert list(ratios) == ["fast"]
    assert ratios["fast"]["per_seed"] == {0: 0.5, 1: 0.25, 2: 2.0}
    assert ratios["fast"]["of_medians"] == 10.0 / 30.0


def test_the_transition_baseline_takes_the_frame_rows_the_sampler_gathered():
    from benchmarks.transition import episode_flags, fill, frame_rows, transitions

    terminated, truncated = episode_flags(5000, np.random.default_rng(0))
    ended = (terminated | truncated)[:, 0].astype(bool)
    assert 2 <= ended.sum() <= 25 and not (ended[1:] & ended[:-1]).any()  # every end is followed by a final row
    rb = transitions(3000, 64)
    fill(rb, 3000, 1024)  # no wrap: frame i is at row i and holds i
    items, info = rb.sample_with_info()
    observation, next_observation = frame_rows(items[0].asnumpy()), frame_rows(items[3].asnumpy())
    starts = info.ids.asnumpy()
    np.testing.assert_array_equal(observation[:, -1], starts)  # the newest frame of a stack is the start's
    np.testing.assert_array_equal(rb.frames.asnumpy()[observation][..., 0, :4].view("<u4")[..., 0], observation)
    assert (next_observation[:, -1] > starts).all() and (next_observation[:, -1] - starts <= 3).all()


@pytest.mark.slow
def test_the_nstep_benchmark_runs_both_variants_per_seed_and_summarizes_them(tmp_path):
    from benchmarks.common import summarize
    from benchmarks.dqn_nstep import main, with_n_step

    results = main(["--smoke", "--out", str(tmp_path), "--variants", "1", "3", "dqn.py"])
    assert [(run["seed"], run["variant"]) for run in results["runs"]] == [
        (0, "configs/dqn_nstep.py, n_step=1"), (0, "configs/dqn_nstep.py, n_step=3"),
        (0, "configs/dqn.py (ReplayBuffer)")]
    assert all(run["env_steps"] == 128 and run["evaluations"] for run in results["runs"])
    recorded = json.loads((tmp_path / "dqn_nstep.json").read_text())
    assert [(run["seed"], run["variant"]) for run in recorded["runs"]] == [
        (run["seed"], run["variant"]) for run in results["runs"]]
    assert recorded["run"]["command"].startswith("python ") and recorded["run"]["mindspore"] == ms.__version__
    runs = [{"variant": "n3", "seed": s, "solved": s != 1, "solved_at": 1000 * (s + 1), "solve_time": 10.0 * (s + 1),
             "env_steps": 5000} for s in range(3)]
    summary = summarize(runs)["n3"]
    assert (summary["seeds"], summary["held"], summary["median_steps"], summary["median_seconds"]) == (3, 2, "2,000",
                                                                                                        "20.0")
    assert (summary["steps"], summary["seconds"]) == ("1,000 / > 5,000 / 3,000", "10 / - / 30")
    config = {"replay_buffer": {"n_step": 3}}
    assert with_n_step(config, 1)["replay_buffer"]["n_step"] == 1 and config["replay_buffer"]["n_step"] == 3


@pytest.mark.slow
def test_the_sweep_reads_variants_and_runs_each_per_seed(tmp_path):
    from benchmarks.dqn_sweep import main, parse_variant, with_changes

    assert parse_variant("shipped") == ("shipped", {})
    name, changes = parse_variant("small:policy.hidden_sizes=(16, 16),learner.learning_rate=2e-3")
    assert (name, changes) == ("small", {("policy", "hidden_sizes"): (16, 16), ("learner", "learning_rate"): 2e-3})
    with pytest.raises(ValueError, match="literal"):
        parse_variant("bad:learner.learning_rate=fast")
    with pytest.raises(ValueError, match=r"SECTION\.KEY=VALUE"):
        parse_variant("bad:learning_rate")
    config = {"learner": {"learning_rate": 1e-3}}
    assert with_changes(config, changes={("learner", "learning_rate"): 5e-4}) == {"learner": {"learning_rate": 5e-4}}
    assert config == {"learner": {"learning_rate": 1e-3}}
    with pytest.raises(KeyError, match=r"learner\.lr"):
        with_changes(config, {("learner", "lr"): 1.0})
    results = main(["--smoke", "--out", str(tmp_path), "--variant", "shipped",
                    "--variant", "small:policy.hidden_sizes=(16, 16)"])
    assert [(run["seed"], run["variant"]) for run in results["runs"]] == [(0, "shipped"), (0, "small")]
    assert all(run["env_steps"] == 128 and run["evaluations"] for run in results["runs"])
    assert set(results["summary"]) == {"shipped", "small"} and (tmp_path / "dqn_sweep.json").is_file()


@pytest.mark.slow
def test_the_evaluation_parts_run_and_the_dynamics_loop_balances_the_pole():
    from benchmarks.dqn_eval_parts import GYMNASIUM_ORDER, STEPWISE, main

    parts = main(["--smoke"])
    assert len(parts) == 9 and all(part["ms"] > 0 and part["host_over_this"] > 0 for part in parts.values())
    # The balancing network and the fixed linear rule both keep every pole up for the 20 steps,
    # whichever loop plays them, with the folded greedy action or the argmax.
    for name in ("host loop, one launch per step", "EvalLoop as shipped (128x128 Q-network)", GYMNASIUM_ORDER, STEPWISE,
                 "EvalLoop with the argmax policy (before FoldedGreedy)", "EvalLoop, 1 step a pass",
                 "dynamics and loop, fixed linear rule"):
        assert parts[name]["mean_output"] == 20.0, name


def test_a_baseline_checkout_is_laid_out_as_installed_and_removed_afterwards():
    import subprocess

    from benchmarks.common import ROOT, checkout, commit_of

    with checkout("HEAD") as tree:
        assert tree != ROOT and commit_of(tree) == commit_of(ROOT)
        assert (tree / "mindspore_rl_buffer" / "ops" / "rng.py").is_file()
        assert (tree / "mindspore_rl_buffer" / "configs" / "dqn_nstep.py").is_file()
    assert not tree.exists()
    listed = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    assert str(tree) not in listed
    with checkout(None) as current:
        assert current == ROOT



CHILD = """import json, sys
import mindspore_rl_buffer.configs, mindspore_rl_buffer.ops
modules = {name: module.__file__ for name, module in sys.modules.items()
           if name.partition(".")[0] == "mindspore_rl_buffer" and module.__file__}
print("FIGURES " + json.dumps({"package": mindspore_rl_buffer.__file__, "modules": modules}))
"""


def test_a_benchmark_process_refuses_a_tree_whose_ops_would_come_from_the_installed_project(tmp_path):
    import shutil

    from benchmarks.common import ROOT, run_in_tree

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    tree = tmp_path / "tree"  # a plain checkout: the package, and ops/ and configs/ beside it, not inside
    for name in ("mindspore_rl_buffer", "ops", "configs"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    installed = re.escape(str(ROOT / "configs" / "__init__.py"))
    with pytest.raises(RuntimeError, match=rf"imported \d+ modules of the package from outside it, such as "
                                           rf"mindspore_rl_buffer\.configs from {installed}: .*common\.checkout"):
        run_in_tree(script, tree, [], "FIGURES ", 120)
    for name in ("ops", "configs"):  # laid out as checkout() lays out a baseline
        (tree / "mindspore_rl_buffer" / name).symlink_to(f"../{name}")
    figures = run_in_tree(script, tree, [], "FIGURES ", 120)
    assert figures == {"package": str(tree / "mindspore_rl_buffer" / "__init__.py")}  # the check's list is dropped


@pytest.mark.slow  # seven training runs: about 40 s
def test_the_solve_time_benchmark_sums_its_phases_and_states_the_targets_as_ratios(tmp_path):
    import json

    from benchmarks.dqn_solve_time import PHASES, main, summarize, targets
    from benchmarks.report import section_dqn_solve_time

    results = main(["--smoke", "--out", str(tmp_path)])
    assert [run["variant"] for run in results["runs"]] == [
        "baseline", "candidate, no cache", "candidate, first run", "candidate, later run"]
    # The further seed: the baseline, no cache and the later run, each once; summed with the first seed's.
    assert [(run["seed"], run["variant"]) for run in results["more_runs"]] == [
        (5, "baseline"), (5, "candidate, no cache"), (5, "candidate, later run")]
    everything = results["every_seed"]
    assert everything["seeds"] == [0, 5] and list(everything["summary"]) == [
        "baseline", "candidate, no cache", "candidate, later run"]
    for variant, figures in everything["compared"].items():
        held = everything["summary"][variant]["steps"]
        assert figures["fewer"] + figures["same"] + figures["more"] == len(
            set(held) & set(everything["summary"]["baseline"]["steps"]))
        # A smoke run's baseline is this checkout, and the cache changes no step: the same agent on each seed.
        assert held == everything["summary"]["baseline"]["steps"] and figures["steps"] == 1.0
    for run in results["runs"]:
        assert list(run["phases"]) == list(PHASES) and run["launches"] >= 2
        assert abs(sum(run["phases"].values()) - run["wall"]) < 1e-6 and run["phases"]["first_launch"] > 0
    assert all(set(checks) == {"wall", "first_launch", "steps", "held"} for checks in results["targets"].values())
    stored, loaded = results["runs"][2:]  # the later run loads the graphs another seed's run stored
    assert loaded["phases"]["first_launch"] < stored["phases"]["first_launch"] and results["cache_seed"] == 1000
    data = json.loads((tmp_path / "dqn_solve_time.json").read_text())
    blocks = section_dqn_solve_time(data, {})
    assert any("target (over the baseline)" in block for block in blocks)
    assert any(block.startswith("Every seed, 0 to 5 (2 seeds") for block in blocks)
    assert any("fewer / same / more steps" in block for block in blocks)

    def run(variant, seed, wall, steps, launch):
        phases = dict.fromkeys(PHASES, 0.0) | {"first_launch": launch}
        return {"variant": variant, "seed": seed, "solved": True, "solved_at": steps, "env_steps": steps,
                "wall": wall, "phases": phases}

    runs = [run("baseline", 0, 10.0, 100, 2.0), run("candidate", 0, 6.0, 110, 1.0),
            run("baseline", 1, 12.0, 200, 2.0), run("candidate", 1, 9.0, 260, 1.2)]
    checks = targets(summarize(runs))["candidate"]
    assert checks["wall"] == {"ratio": 0.682, "at_most": 0.7, "met": True}
    assert checks["first_launch"]["ratio"] == 0.55 and not checks["first_launch"]["met"]
    assert checks["steps"] == {"ratio": round(185 / 150, 3), "at_most": 1.2, "met": False}
    assert checks["held"] == {"candidate": "2/2", "met": True}


@pytest.mark.slow
def test_the_iteration_benchmark_counts_each_part_s_kernels_and_the_parts_add_up(tmp_path):
    from benchmarks.dqn_iteration import DEFAULT, KERNEL_TYPES, NEW, PARTS, RUNTIME, TREES, main
    from benchmarks.report import page_block_lines

    results = main(["--smoke", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "dqn_iteration.json").read_text())
    assert written["run"]["commit"] == results["run"]["commit"] and len(written["rounds"]) == 1
    parts = written["summary"]["parts"]
    runtime = written["summary"]["runtime_us"]
    assert set(parts) == set(PARTS) and set(runtime) == {DEFAULT, NEW}
    # The runtime's costs are differences of timings: measured, of either sign on a loaded machine.
    assert all(set(runtime[tree]) == set(RUNTIME) and all(map(math.isfinite, runtime[tree].values()))
               for tree in runtime)
    for part in PARTS:  # the thread setting changes no graph
        assert parts[part][DEFAULT]["kernels"] == parts[part][NEW]["kernels"], part
    for tree in TREES:  # a smoke run's baseline is this checkout
        kernels = {part: parts[part][tree]["kernels"] for part in PARTS}
        assert all(parts[part][tree]["ms"] > 0 and parts[part][tree]["kernel_ms"] > 0 for part in PARTS)
        # The training loop's pass is its collect pass and one learn call, give or take the loops' counters.
        assert abs(kernels["iteration"] - kernels["collect"] - kernels["learn"]) <= 4, kernels
        # The learn call is a sample of 256 and two updates, and the sample's cut into two batches (a Split
        # per column, a trailing axis for the three scalar ones) and the loss sum.
        assert 0 <= kernels["learn"] - kernels["sample"] - 2 * kernels["update"] <= 16, kernels
    # The iteration's kernels by type add up to its kernels (one round: its figures are the medians), and the
    # updates' MatMuls take the most run time.
    types = written["summary"]["kernel_types"]
    assert len(types) == KERNEL_TYPES + 1 and types[-1][0] == "other" and types[0][0] == "MatMul", types
    assert math.isclose(sum(kernels for _, kernels, _ in types), parts["iteration"][NEW]["kernels"]), types
    assert math.isclose(sum(ms for *_, ms in types), parts["iteration"][NEW]["kernel_ms"]), types
    rendered = page_block_lines({"dqn_iteration": written}, "dqn_iteration")
    assert rendered[0].startswith("Recorded by `python -m benchmarks.dqn_iteration`")
    assert any("\n| MatMul | " in line for line in rendered)
    # The MatMul's rate is a difference of two timings: on a loaded machine a smoke run's can come out
    # negative (it did, -2,315 µs), and then no rate is given.
    assert any("GFLOP/s" in line for line in rendered) == (runtime[NEW]["matmul_us"] > 0)


@pytest.mark.slow
def test_the_compile_benchmark_times_every_part_of_both_trees_and_splits_the_training_graph(tmp_path):
    from benchmarks.common import ROOT
    from benchmarks.dqn_compile import FUNCTIONS, GROUPS, OPTIONS, PARTS, main, spawn
    from benchmarks.report import page_block_lines

    # A measured run gives each part a process of its own; a smoke run, one process per tree.
    alone = spawn(ROOT, ["empty"])["parts"]
    assert set(alone) == {"empty"} and alone["empty"]["first_s"] >= alone["empty"]["compile_s"] > 0, alone
    results = main(["--smoke", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "dqn_compile.json").read_text())
    assert written["run"]["commit"] == results["run"]["commit"] and len(written["rounds"]) == 1
    summary = written["summary"]
    assert set(summary["parts"]) == set(PARTS) and set(summary["options"]) == set(OPTIONS) - {"default"}
    round_ = written["rounds"][0]
    assert set(round_["parts"]) == {"baseline", "candidate"} and set(round_["options"]) == set(summary["options"])
    packages = set()
    for tree, parts in round_["parts"].items():  # a smoke run's baseline is this checkout
        assert set(parts) == set(PARTS)
        packages |= {figures["package"] for figures in parts.values()}
        for part, figures in parts.items():  # one compiled call less one run call; the summary takes them as they are
            assert figures["first_s"] > 0 and figures["compile_s"] == summary["parts"][part][tree], (part, figures)
        phases, logged = summary["phases"][tree], round_["phases"][tree]
        assert set(phases) == {*GROUPS, "compile_s"}
        # The log was caught around the compile and parsed: its actions, type inference and the passes among them,
        # and the groups share out exactly the compile they sit in.
        assert {"type_inference", "optimize"} <= set(logged["actions"]), logged
        assert abs(sum(phases[name] for name in GROUPS) - phases["compile_s"]) < 1e-5, phases
    for name, option in summary["options"].items():
        compiled = round_["options"][name]["compile_s"]
        assert option == {"compile_s": compiled, "ratio": compiled / round_["parts"]["candidate"]["train_loop"]
                          ["compile_s"]}, name
    assert len(packages) == 1
    # The graph's size, counted in its IR files: type inference's function graphs, inlined by the passes into far
    # fewer graphs and nodes; both trees (one checkout here) compile the same graph.
    sizes = written["sizes"]
    assert set(sizes) == {"baseline", "candidate"} and sizes["baseline"] == sizes["candidate"]
    inferred, passed = sizes["candidate"]["type_inference"], sizes["candidate"]["validate"]
    assert inferred["graphs"] > 10 * passed["graphs"] > 0 and inferred["nodes"] > passed["nodes"] > 100, sizes
    rendered = page_block_lines({"dqn_compile": written}, "dqn_compile")
    assert rendered[0].startswith("Recorded by `python -m benchmarks.dqn_compile`")
    assert any(f"{inferred['graphs']:,} graphs, {inferred['nodes']:,} nodes" in line for line in rendered)
    # Type inference's nodes by function: the most first, and within the whole.
    functions = inferred["functions"]
    assert len(functions) == FUNCTIONS and all(name and graphs > 0 for name, graphs, _ in functions), functions
    nodes = [count for *_, count in functions]
    assert nodes == sorted(nodes, reverse=True) and sum(nodes) <= inferred["nodes"], functions
    assert any(f"| `{functions[0][0]}` | {functions[0][1]:,} | {functions[0][2]:,} |" in line for line in rendered)


@pytest.mark.slow
def test_the_rng_benchmark_times_the_kernel_and_the_generator_alike_and_records_its_run(tmp_path):
    from benchmarks.rng_cost import main

    results = main(["--smoke", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "rng_cost.json").read_text())
    assert written["run"]["commit"] == results["run"]["commit"]
    figures = written["costs_us"]["64"]
    for name in ("kernel", "generator", "bare_sample", "buffer_sample"):
        assert figures[name] > 0, name
    assert figures["generator_vs_kernel"] > 0 and figures["buffer_vs_bare_sample"] > 0
    assert set(written["uniformity_pvalues"]) == {"values_below_1000", "low_1_bits", "low_4_bits", "low_8_bits"}


@pytest.mark.slow
def test_the_prioritized_transition_benchmark_compares_both_buffers_filled_alike(tmp_path):
    from mindspore_rl_buffer.ops import empty_levels

    from benchmarks.prioritized_transition import buffers, main, spread_priorities
    from benchmarks.transition import fill

    rb = buffers(512, True)
    fill(rb, 512, 256)
    spread_priorities(rb, 8)
    leaves = rb.tree_leaves()[0]
    # The priorities set span orders of magnitude (leaves of 1e-3 ** 0.5 .. 1e3 ** 0.5), and the
    # slots that are not valid starts keep leaves of 0.
    assert leaves.max() / leaves[leaves > 0].min() > 100
    assert (leaves > 0).sum() == int(rb.valid_starts())
    results = main(["--smoke", "--out", str(tmp_path)])
    speed, memory = results["speed"], results["memory"]
    assert set(speed["us"]) == {"uniform_sample", "prioritized_sample", "prioritized_sample_update",
                                "uniform_insert", "prioritized_insert"}
    assert memory["prioritized"]["prioritized"] and not memory["uniform"]["prioritized"]
    # What the prioritized buffer allocates beyond the uniform one: both trees, max_priority and steps.
    levels = empty_levels(memory["prioritized"]["capacity"])
    assert memory["tree_bytes"] == sum(level.nbytes for tree in levels for level in tree) + 8
    assert (tmp_path / "prioritized_transition.json").exists()
