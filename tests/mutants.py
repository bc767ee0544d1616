"""Mutation check of the fast test tier: hand-written bugs that the fast tests must catch.

Run from the repository root::

    python -m tests.mutants            # every mutant, two at a time (--jobs 2)
    python -m tests.mutants head_off_by_one get_item_without_head   # some, by name
    python -m tests.mutants --list     # names, files and what each changes

Each mutant replaces one exact snippet of one library file (the snippet must occur exactly
once, so a mutant that no longer applies fails loudly instead of passing) in a temporary copy
of the repository (never in the working tree), and runs the fast-tier tests chosen for it
there, the smallest set that catches it::

    python -m pytest -q -x -m "not slow" -p no:cacheprovider -n 0 -rfE <tests>

It is caught when pytest exits 1 with a test that failed as it ran (its setup, call or
teardown); an exit of 2 (a collection or import error) is not a catch: a mutant must break
behaviour, not imports. A small plugin written into the copy records the failed node ids.

The copy imports its own code: setup.py installs ``ops/`` and ``configs/`` as
``mindspore_rl_buffer.ops`` and ``mindspore_rl_buffer.configs`` (``package_dir``), and the
editable install maps those names back to the working tree, so the copy links both
directories into its package, and a sanity mutant (a mark added to one module of each) must
be seen by a child interpreter that loads them from the copy. If the repository's pytest.ini
does not register the ``slow`` marker, the copy's registers it.

A baseline run (no mutant) over the union of the chosen tests must pass first (exit 2
otherwise). Exit status: 0 when every mutant is caught, 1 otherwise. A mutant whose tests are
all marked slow is not caught (exit 5 of pytest): the fast tier then has a gap.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("mindspore_rl_buffer", "ops", "configs", "tests", "pytest.ini", "setup.py")
# Installed under the package by setup.py's package_dir: linked there in the copy.
LINKED = {"ops": "ops", "configs": "configs"}
# In one process (-n 0: pytest.ini's addopts may spread the run over pytest-xdist workers, whose
# -x ends as an interrupted session, exit 2, and the mutants run side by side already).
SERIAL = ("-n", "0") if importlib.util.find_spec("xdist") else ()
PYTEST = ("-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider", *SERIAL, "-rfE")
SLOW_MARKER = "slow: slow tier (run with -m slow)"
# A pytest plugin written into each copy: it appends "phase<TAB>node id" of every failed report
# (collection included) to the file $MUTANTS_REPORTS, node ids exactly as pytest names them.
PLUGIN = "_mutants_reports"
PLUGIN_SOURCE = '''import os


def _note(phase, nodeid):
    with open(os.environ["MUTANTS_REPORTS"], "a", encoding="utf-8") as reports:
        reports.write(f"{phase}\\t{nodeid}\\n")


def pytest_runtest_logreport(report):
    if report.failed:
        _note(report.when, report.nodeid)


def pytest_collectreport(report):
    if report.failed:
        _note("collect", report.nodeid)
'''
REPORTS = ".mutants-reports"
# Why an exit is not a catch.
NO_CATCH = {0: ": every test passed", 2: ": interrupted, a collection or import error",
            4: ": a test id is not found", 5: ": no fast test selected (all marked slow?)"}


@dataclass(frozen=True)
class Mutant:
    """One bug: ``original`` (exactly once in ``path``) becomes ``replacement``."""

    name: str
    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    description: str


MUTANTS = (
    Mutant(
        "write_position_off_by_one", "ops/ring.py",
        "    end = (head + count) % capacity  # the write position",
        "    end = (head + count + 1) % capacity  # the write position",
        ("tests/ops/test_ring.py::test_insert_rows_follows_item_by_item_appends_from_every_state[direct]",),
        "ring.insert_rows writes one row past the write position (head + count)",
    ),
    Mutant(
        "head_off_by_one", "ops/ring.py",
        "    new_head = (head + (total - new_count)) % capacity",
        "    new_head = (head + (total - new_count) + 1) % capacity",
        ("tests/ops/test_ring.py::test_insert_rows_follows_item_by_item_appends_from_every_state[direct]",),
        "ring.insert_rows moves head one row too far on a batch smaller than the capacity",
    ),
    Mutant(
        "get_item_without_head", "ops/ring.py",
        "    rows = logical_to_physical(head, CAST(logical % capacity, ms.int32), capacity)",
        "    rows = CAST(logical % capacity, ms.int32)",
        ("tests/ops/test_ring.py::test_get_item_reads_by_python_index_scalar_or_tensor[wrapped-direct]",),
        "ring.get_item reads logical index i at physical row i, without the remap through head",
    ),
    Mutant(
        "ordered_sample_by_physical_row", "ops/ring.py",
        "        logical = sort_ints(drawn, capacity)[0]\n"
        "        physical = logical_to_physical(head, logical, capacity)",
        "        physical = sort_ints(drawn, capacity)[0]\n"
        "        logical = physical_to_logical(head, physical, capacity)",
        ("tests/ops/test_ring.py::"
         "test_sample_indices_draw_stored_items_at_their_rows[ordered-with_replacement-direct]",),
        "ordered sampling sorts physical rows, not logical indexes: not oldest first once wrapped",
    ),
    Mutant(
        "insert_loses_wraparound", "ops/ring.py",
        "    rows = first.reshape((1,)) if kept == 1 else (first + arange(kept)) % capacity",
        "    rows = first.reshape((1,)) if kept == 1 else ops.minimum(first + arange(kept), capacity - 1)",
        ("tests/ops/test_ring.py::test_insert_rows_follows_item_by_item_appends_from_every_state[direct]",),
        "a batch crossing the end of the ring piles onto the last row instead of wrapping to row 0",
    ),
    Mutant(
        "overflow_keeps_oldest", "ops/ring.py",
        "            values = values[batch_size - kept:]",
        "            values = values[:kept]",
        ("tests/ops/test_ring.py::test_insert_writes_like_the_model_and_returns_the_rows_it_wrote"
         "[larger_than_capacity_from_empty-direct]",),
        "a batch larger than the capacity keeps its oldest items instead of its newest",
    ),
    Mutant(
        "tree_wrong_leaf", "ops/priority.py",
        "    nodes = ops.gather(slots, order, 0) + size",
        "    nodes = (ops.gather(slots, order, 0) + 1) % size + size",
        ("tests/ops/test_priority.py::test_set_leaves_gives_the_trees_of_numpys_assignment[5-direct]",),
        "the priority trees update the leaf of the next slot",
    ),
    Mutant(
        "tree_misses_root", "ops/priority.py",
        "    for _ in range(size.bit_length() - 1):\n        sibling",
        "    for _ in range(size.bit_length() - 2):\n        sibling",
        ("tests/ops/test_priority.py::test_set_leaves_gives_the_trees_of_numpys_assignment[5-direct]",),
        "the priority trees update every ancestor of a leaf but the root",
    ),
    Mutant(
        "new_items_not_max_priority", "ops/priority.py",
        "    values = ops.broadcast_to(leaf_values(max_priority, alpha), rows.shape)",
        "    values = ops.broadcast_to(leaf_values(ops.ones_like(max_priority), alpha), rows.shape)",
        ("tests/ops/test_priority.py::test_insert_priorities_give_the_written_rows_the_largest_priority[direct]",),
        "new items get priority 1 instead of the largest priority seen so far",
    ),
    Mutant(
        "truncation_as_termination", "ops/stacks.py",
        "    terminal = read_rows(terminated, index, num_envs) != 0",
        "    terminal = ops.logical_or(read_rows(terminated, index, num_envs) != 0,\n"
        "                              read_rows(truncated, index, num_envs) != 0)",
        ("tests/test_transition.py::"
         "test_a_truncated_episode_bootstraps_from_its_final_observation_not_the_next_reset",),
        "an n-step discount of 0 after a truncation (truncated read as terminated)",
    ),
    Mutant(
        "frame_stack_crosses_episode_start", "ops/stacks.py",
        "        columns = [np.concatenate([s - np.minimum(back, depth) if s > 1 else [],",
        "        columns = [np.concatenate([s - back if s > 1 else [],",
        ("tests/test_transition.py::test_frame_stacks_repeat_the_first_frame_of_their_own_episode",),
        "a frame stack reaches back past its episode's first frame into the previous episode",
    ),
    Mutant(
        "start_inside_write_window", "ops/transition.py",
        "        first, last = head, count - (n_step + 1)",
        "        first, last = head, count - n_step",
        ("tests/ops/test_transition.py::test_every_operator_agrees_with_the_model_after_every_batch[case0]",),
        "TransitionReplayBuffer (one environment): valid starts reach t = count - n_step, reading the write row",
    ),
    Mutant(
        "checkpoint_restores_before_validating", "mindspore_rl_buffer/checkpoint.py",
        "        for name, buffer in buffers.items():\n"
        "            problems += [f\"the random state of",
        "        if isinstance(net, nn.Cell):\n"
        "            for pname, param in state.items():\n"
        "                param.copy_(loaded[pname])\n"
        "        for name, buffer in buffers.items():\n"
        "            problems += [f\"the random state of",
        ("tests/test_checkpoint.py::"
         "test_a_checkpoint_whose_cursors_break_the_contract_is_refused_and_changes_nothing[0-8]",),
        "load_checkpoint copies the tensors (cursors too) into the buffer before it checks the cursors",
    ),
    Mutant(
        "writer_drops_partial_batch", "mindspore_rl_buffer/writer.py",
        "        while self._pending:\n            left = self._pending",
        "        while self._pending == self._batch_size:\n            left = self._pending",
        ("tests/test_writer.py::test_staged_transitions_are_invisible_until_flushed_and_a_with_block_flushes",),
        "BufferWriter.flush inserts only a full stage: the last partial batch never reaches the buffer",
    ),
    Mutant(
        "reset_keeps_head", "mindspore_rl_buffer/core.py",
        "        ops.assign(self.head, ops.zeros_like(self.head))\n",
        "",
        ("tests/test_replay_buffer.py::test_reset_returns_to_the_constructed_state",),
        "reset zeroes count but leaves head (MindSpore RL's old reset)",
    ),
    Mutant(
        "window_crosses_write_position", "ops/ring.py",
        "    valid = count - num_steps + 1",
        "    valid = count - num_steps + 2",
        ("tests/ops/test_ring.py::"
         "test_sample_windows_are_consecutive_uniform_and_never_cross_the_write_position[direct]",),
        "sample_windows may start one row late, so a window reads across the write position",
    ),
    Mutant(
        "start_inside_write_window_multi_env", "ops/transition.py",
        "        first, last = head * num_envs, count * num_envs - (n_step * num_envs + 1)",
        "        first, last = head * num_envs, count * num_envs - (n_step * num_envs + 1) + num_envs",
        ("tests/ops/test_transition.py::test_sample_starts_draws_only_valid_starts_and_all_of_them",),
        "TransitionReplayBuffer (several environments): valid starts reach t = count - n_step, reading the write row",
    ),
    Mutant(
        "dedupe_first_wins", "ops/dedupe.py",
        "    end = ops.searchsorted(ordered, key + n) - 1",
        "    end = ops.searchsorted(ordered, key)",
        ("tests/ops/test_dedupe.py::test_last_occurrence_matches_numpy_on_repeated_indexes",),
        "of repeated indexes in one write, the first occurrence wins instead of the last",
    ),
    Mutant(
        "drift_guard_removed", "ops/priority.py",
        "    return ops.minimum(find_prefix(sum_tree, targets, capacity), count - 1)",
        "    return find_prefix(sum_tree, targets, capacity)",
        ("tests/ops/test_priority.py::test_find_slots_matches_searchsorted_and_ends_in_a_stored_slot[direct]",),
        "the prefix-sum descent may end in an unstored slot (float32 drift guard gone)",
    ),
    Mutant(
        "min_tree_reads_sum_tree", "ops/priority.py",
        "ops.gather(mins, where, 0), ops.gather(min_tree, sibling, 0)))",
        "ops.gather(mins, where, 0), ops.gather(sum_tree, sibling, 0)))",
        ("tests/ops/test_priority.py::test_set_leaves_gives_the_trees_of_numpys_assignment[5-direct]",),
        "the min tree combines a node with its sibling's sum instead of its minimum",
    ),
    Mutant(
        "weights_ignore_beta", "ops/priority.py",
        "    weights = ops.pow(min_tree[1] / leaves, beta)",
        "    weights = min_tree[1] / leaves",
        ("tests/ops/test_priority.py::"
         "test_sample_finds_stored_slots_within_their_strata_with_the_weights_formula[direct]",),
        "importance weights ignore beta",
    ),
    Mutant(
        "max_priority_can_fall", "ops/priority.py",
        "    return ops.maximum(max_priority, clamped.max())",
        "    return clamped.max()",
        ("tests/ops/test_priority.py::"
         "test_update_priorities_write_the_last_of_repeated_slots_and_return_the_largest[direct]",),
        "update_priorities returns the batch's largest priority, so max_priority can fall",
    ),
    Mutant(
        "reservoir_fills_one_short", "ops/reservoir.py",
        "    filling = stream <= capacity",
        "    filling = stream < capacity",
        ("tests/ops/test_reservoir.py::test_draw_slots_while_filling_give_the_next_slots_in_order",),
        "the reservoir stops filling one item early: item k = capacity is not always kept",
    ),
    Mutant(
        "unreplaced_sample_draws_unstored_row", "ops/ring.py",
        "        keys = ops.where(arange(capacity) < count, keys, -1.0)",
        "        keys = ops.where(arange(capacity) <= count, keys, -1.0)",
        ("tests/ops/test_ring.py::"
         "test_sample_indices_draw_stored_items_at_their_rows[unordered-without_replacement-direct]",),
        "sampling without replacement may draw the unwritten row at count",
    ),
    Mutant(
        "n_step_discount_power_off_by_one", "ops/stacks.py",
        "np.power(float(gamma), np.maximum(j - s, 0))",
        "np.power(float(gamma), np.maximum(j - s + 1, 0))",
        ("tests/test_transition.py::test_n_step_returns_stop_at_the_episode_end",),
        "the n-step return discounts its first reward too (gamma^(k+1) instead of gamma^k)",
    ),
    Mutant(
        "priority_reset_keeps_max_priority", "mindspore_rl_buffer/priority_replay_buffer.py",
        "    ops.assign(max_priority, ops.ones_like(max_priority))\n",
        "",
        ("tests/test_priority_replay_buffer.py::test_reset_returns_to_the_constructed_state",),
        "PriorityReplayBuffer.reset keeps the largest priority seen before it",
    ),
    Mutant(
        "contract_allows_head_before_full", "mindspore_rl_buffer/contracts.py",
        "    if head != 0 and count != capacity:\n"
        "        return f\"head={head} must be 0 while the buffer is not full (count={count} < {capacity})\"\n",
        "",
        ("tests/test_checkpoint.py::"
         "test_a_checkpoint_whose_cursors_break_the_contract_is_refused_and_changes_nothing[2-5]",),
        "the checkpoint's cursor check accepts head != 0 in a buffer that is not full",
    ),
    Mutant(
        "host_index_bound_off_by_one", "mindspore_rl_buffer/_validation.py",
        "        if not -size <= index < size:",
        "        if not -size <= index <= size:",
        ("tests/test_validation.py::test_bad_call_raises_and_leaves_the_buffer_unchanged[get_item past the newest]",),
        "a direct get_item(size()) passes the host check and reads an unstored row",
    ),
    Mutant(
        "checksum_not_verified", "mindspore_rl_buffer/checkpoint.py",
        "        elif name in checksums and checksum(value) != checksums[name]:",
        "        elif False:",
        ("tests/test_checkpoint.py::test_a_flipped_data_byte_is_named_by_its_parameter",),
        "load_checkpoint no longer compares each tensor with its recorded checksum",
    ),
    Mutant(
        "last_ended_from_first_row", "ops/transition.py",
        "        ended = ops.gather(ended, offsets(steps - 1, steps), 0)",
        "        ended = ops.gather(ended, offsets(0, 1), 0)",
        ("tests/ops/test_transition.py::test_every_operator_agrees_with_the_model_after_every_batch[case0]",),
        "after a batch of steps, whether an episode just ended is read from the batch's first row, not its last",
    ),
    Mutant(
        "numpy_ring_overflow_keeps_wrong_rows", "mindspore_rl_buffer/host_ring.py",
        "        rows = logical_rows(self.head, self.count + (n - kept) + np.arange(kept), self.capacity)",
        "        rows = logical_rows(self.head, self.count + np.arange(kept), self.capacity)",
        ("tests/test_host_ring.py::test_inserts_keep_the_newest_items_in_order_under_the_cursor_contract",),
        "the host ring (PyUniformReplayBuffer) writes an overflowing batch from the write position, misplacing it",
    ),
    Mutant(
        "writer_keeps_failed_rows_staged", "mindspore_rl_buffer/writer.py",
        "            self._pending = before\n",
        "",
        ("tests/test_writer.py::"
         "test_a_flush_that_fails_partway_never_inserts_a_transition_twice_and_the_writer_goes_on",),
        "a writer insert whose flush fails keeps the call's rows staged, so a retry inserts them twice",
    ),
    Mutant(
        "locate_boundary_off_by_one", "ops/sharded.py",
        "    owner = (index.reshape(-1, 1) >= ends.reshape(1, -1))",
        "    owner = (index.reshape(-1, 1) > ends.reshape(1, -1))",
        ("tests/ops/test_sharded.py::test_locate_maps_global_indexes_to_shards_like_searchsorted",),
        "a global index at the end of one shard is given to that shard instead of the next",
    ),
    Mutant(
        "gather_owned_without_head", "ops/sharded.py",
        "    rows = ops.where(owner == rank, logical_to_physical(head, local, capacity), 0)",
        "    rows = ops.where(owner == rank, local, 0)",
        ("tests/ops/test_sharded.py::"
         "test_gather_owned_reads_the_draws_this_shard_owns_and_row_0_for_the_others[direct]",),
        "a shard reads a global draw's logical index as its physical row, without the remap through head",
    ),
    Mutant(
        "trajectory_ids_ignore_first_add", "mindspore_rl_buffer/trajectory.py",
        "first_add + ops.cast(logical, ms.int64)",
        "ops.cast(logical, ms.int64)",
        ("tests/test_trajectory.py::test_add_batch_wraps_like_the_model_and_windows_never_cross_the_write_position",),
        "TrajectoryReplayBuffer's ids count from the oldest stored step, not from the first add",
    ),
    Mutant(
        "trajectory_never_draws_last_segment", "mindspore_rl_buffer/trajectory.py",
        "uniform_int((picks, 1), self._segments, self.storage.rng())",
        "uniform_int((picks, 1), ops.maximum(self._segments - 1, 1), self.storage.rng())",
        ("tests/test_trajectory.py::test_add_batch_wraps_like_the_model_and_windows_never_cross_the_write_position",),
        "TrajectoryReplayBuffer never samples its last segment",
    ),
)


# ----------------------------------------------------------------------------- the copy
def make_copy(root: Path, destination: Path) -> Path:
    """Copy the repository's package, operators, configs and tests to ``destination``; link
    ``ops`` and ``configs`` into the package as setup.py installs them; register the ``slow``
    marker in the copy's pytest.ini if the repository's does not yet."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=ignore, symlinks=True)
        elif source.exists():
            shutil.copy2(source, destination / name)
    for link, target in LINKED.items():
        (destination / "mindspore_rl_buffer" / link).symlink_to(Path("..") / target, target_is_directory=True)
    (destination / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    ini = destination / "pytest.ini"
    text = ini.read_text(encoding="utf-8") if ini.exists() else "[pytest]\n"
    if not re.search(r"^\s+slow\s*:", text, re.MULTILINE):
        if re.search(r"^markers\s*=", text, re.MULTILINE):
            text = re.sub(r"^(markers\s*=.*)$", lambda m: f"{m.group(1)}\n    {SLOW_MARKER}", text, count=1,
                          flags=re.MULTILINE)
        else:
            text = text.replace("[pytest]\n", f"[pytest]\nmarkers =\n    {SLOW_MARKER}\n", 1)
        ini.write_text(text, encoding="utf-8")
    return destination


def child_env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    # No bytecode: a mutant and its original can share a size and an mtime second.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # Plain, fast runs, also when this script runs inside a pytest(-xdist) worker (tests/test_mutants.py).
    for name in list(env):
        if name in ("PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST") or name.startswith(("PYTEST_XDIST_", "COVERAGE_PROCESS_")):
            del env[name]
    return env


def check_imports(copy: Path) -> None:
    """The sanity mutant: mark a module of each installed directory in ``copy`` (the package,
    ``ops``, ``configs``) and fail unless a child interpreter imports the marked modules from
    ``copy`` and sees the marks; then remove them."""
    marked = {"mindspore_rl_buffer.core": "mindspore_rl_buffer/core.py", "mindspore_rl_buffer.ops.ring": "ops/ring.py",
              "mindspore_rl_buffer.configs": "configs/__init__.py"}
    token = f"mutants-sanity-{os.getpid()}"
    originals = {path: (copy / path).read_text(encoding="utf-8") for path in marked.values()}
    for path, text in originals.items():
        (copy / path).write_text(f"{text}\nMUTANTS_SANITY = {token!r}\n", encoding="utf-8")
    probe = "import importlib\n" + "".join(
        f"m = importlib.import_module({module!r}); print('MUTANTS', m.__file__, m.MUTANTS_SANITY, sep='\\t')\n"
        for module in marked)
    try:
        done = subprocess.run([sys.executable, "-c", probe], cwd=copy, env=child_env(copy), capture_output=True,
                              text=True, timeout=300)
    finally:
        for path, text in originals.items():
            (copy / path).write_text(text, encoding="utf-8")
    lines = [line.split("\t")[1:] for line in done.stdout.splitlines() if line.startswith("MUTANTS\t")]
    good = len(lines) == len(marked) and all(
        Path(file).resolve().is_relative_to(copy.resolve()) and mark == token for file, mark in lines)
    if done.returncode or not good:
        raise SystemExit(f"the copy at {copy} does not import its own package, operators and configs:\n"
                         f"{done.stdout}{done.stderr}")


def mutated(root: Path, mutant: Mutant) -> tuple[str, str]:
    """The text of ``mutant``'s file under ``root``, and that text with the mutant applied."""
    text = (root / mutant.path).read_text(encoding="utf-8")
    found = text.count(mutant.original)
    if found != 1:
        raise SystemExit(f"mutant {mutant.name}: its snippet occurs {found} times in {mutant.path}, not once; "
                         f"update the mutant to the code")
    return text, text.replace(mutant.original, mutant.replacement)


def apply(copy: Path, mutant: Mutant) -> str:
    """Write ``mutant`` into ``copy``; return the original text to put back."""
    text, changed = mutated(copy, mutant)
    (copy / mutant.path).write_text(changed, encoding="utf-8")
    return text


# ---------------------------------------------------------------------------- the runs
@dataclass
class Outcome:
    returncode: int
    failed: list[tuple[str, str]]  # (phase, node id) of every failed report
    seconds: float
    output: str


def run_tests(copy: Path, tests: list[str]) -> Outcome:
    """Run ``tests`` in ``copy``; the plugin :data:`PLUGIN` lists the reports that failed, by phase."""
    failures = copy / REPORTS
    failures.unlink(missing_ok=True)
    env = child_env(copy)
    env["MUTANTS_REPORTS"] = str(failures)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *PYTEST, "-p", PLUGIN, *tests], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=1800)
    output = done.stdout + done.stderr
    lines = failures.read_text(encoding="utf-8").splitlines() if failures.exists() else []
    failed = [tuple(line.split("\t", 1)) for line in lines]
    return Outcome(done.returncode, failed, time.perf_counter() - start, output)


def fast_nodes(copy: Path, tests: list[str]) -> list[str] | None:
    """The node ids of the fast tier that ``tests`` select (collected in ``copy``), or ``None``
    after printing why collection failed."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "not slow", "-p",
                           "no:cacheprovider", *SERIAL, *tests], cwd=copy, env=child_env(copy), capture_output=True,
                          text=True, timeout=600)
    if done.returncode not in (0, 5):  # 5: every test deselected
        print(f"{done.stdout[-6000:]}{done.stderr[-3000:]}")
        print(f"collecting the chosen tests failed (exit {done.returncode})")
        return None
    return [line.strip() for line in done.stdout.splitlines() if "::" in line]


def selects(test: str, node: str) -> bool:
    """Whether the pytest argument ``test`` (a file, a test or one parametrization) selects ``node``."""
    return node == test or node.startswith((f"{test}::", f"{test}["))


def caught(outcome: Outcome) -> bool:
    """Exit 1 with a test that failed as it ran (its setup, call or teardown), not in collection."""
    return outcome.returncode == 1 and any(phase != "collect" for phase, _ in outcome.failed)


def table(rows: list[tuple[str, ...]]) -> str:
    header = ("mutant", "file", "caught", "seconds", "caught by", "what it changes")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    return "\n".join(lines)


def run_mutant(copies: queue.Queue, mutant: Mutant) -> tuple[tuple[str, ...], Outcome]:
    """Apply ``mutant`` in a free copy, run its tests there, put the copy back as it was."""
    copy = copies.get()
    try:
        original = apply(copy, mutant)
        try:
            outcome = run_tests(copy, list(mutant.tests))
        finally:
            (copy / mutant.path).write_text(original, encoding="utf-8")
    finally:
        copies.put(copy)
    hit = caught(outcome)
    if hit:
        by = next(node for phase, node in outcome.failed if phase != "collect")
    elif any(phase == "collect" for phase, _ in outcome.failed):
        by = f"(exit {outcome.returncode}{NO_CATCH[2]})"
    else:
        by = f"(exit {outcome.returncode}{NO_CATCH.get(outcome.returncode, '')})"
    return (mutant.name, mutant.path, "yes" if hit else "NO", f"{outcome.seconds:.1f}", by, mutant.description), outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--jobs", type=int, default=2, help="pytest runs at once, each in its own copy (default: 2)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copies")
    args = parser.parse_args(argv)
    if args.list:
        for mutant in MUTANTS:
            print(f"{mutant.name:40} {mutant.path:36} {mutant.description}")
        return 0
    known = {mutant.name: mutant for mutant in MUTANTS}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        parser.error(f"unknown mutants: {', '.join(unknown)}")
    chosen = [known[name] for name in args.names] if args.names else list(MUTANTS)
    jobs = max(1, min(args.jobs, len(chosen)))
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="msrb-mutants-"))
    try:
        copies = [make_copy(ROOT, workdir / f"repo{i}") for i in range(jobs)]
        for mutant in chosen:  # every snippet applies before anything runs
            mutated(copies[0], mutant)
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(check_imports, copies))
            union = list(dict.fromkeys(test for mutant in chosen for test in mutant.tests))
            nodes = fast_nodes(copies[0], union)
            if nodes is None:
                return 2
            results = {}  # a mutant whose tests are all slow (or gone) is not caught, and not run
            for mutant in chosen:
                if not any(selects(test, node) for test in mutant.tests for node in nodes):
                    results[mutant.name] = (mutant.name, mutant.path, "NO", "0.0", "(no fast test in its selection)",
                                            mutant.description)
                    print(f"{mutant.name}: SURVIVED, none of its tests is in the fast tier: {list(mutant.tests)}")
            union = [test for test in union if any(selects(test, node) for node in nodes)]
            parts = [part for part in (union[i::jobs] for i in range(jobs)) if part]  # no run without tests
            baseline = list(pool.map(run_tests, copies, parts))
            print(f"baseline: {len(union)} test selections, exit {[b.returncode for b in baseline]}, "
                  f"{max((b.seconds for b in baseline), default=0):.1f} s", flush=True)
            if any(b.returncode for b in baseline):
                for b in baseline:
                    if b.returncode:
                        print(b.output[-6000:])
                print("the baseline (no mutant) must pass before mutants mean anything")
                return 2
            free: queue.Queue = queue.Queue()
            for copy in copies:
                free.put(copy)
            runs = [pool.submit(run_mutant, free, mutant) for mutant in chosen if mutant.name not in results]
            for future in as_completed(runs):
                row, outcome = future.result()
                results[row[0]] = row
                print(f"{row[0]}: {'caught' if row[2] == 'yes' else 'SURVIVED'} ({row[3]} s) {row[4]}", flush=True)
                if row[2] != "yes":
                    print(outcome.output[-3000:])
    finally:
        if args.keep:
            print(f"copies kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    rows = [results[mutant.name] for mutant in chosen]
    print()
    print(table(rows))
    survivors = [row[0] for row in rows if row[2] != "yes"]
    print(f"\n{len(rows) - len(survivors)} of {len(rows)} mutants caught in {time.perf_counter() - started:.0f} s"
          + (f"; survived: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
