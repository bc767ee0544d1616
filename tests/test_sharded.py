"""ShardedReplayBuffer: single-process equivalence with ReplayBuffer, and a real 2-rank msrun job.

The 2-rank job (``tests/sharded_worker.py``) is launched once for the module: every rank
writes what it saw to a JSON file and the tests below compare the ranks. Items inserted on
rank ``r`` are numbered ``1000 * r + i`` and encode their number in every column, so the
worker's ``decode`` already refused any torn row, and a row's number names its shard.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn
from scipy.stats import chisquare

from mindspore_rl_buffer import ReplayBuffer, ShardedReplayBuffer, create_buffer
from mindspore_rl_buffer.files import shard_path
from mindspore_rl_buffer.sharded import shard_capacities
from tests.helpers import DTYPES, MS_DTYPES, NAMES, SEQUENCE, SHAPES, RingModel, decode, encoded_batch
from tests.msrun_helpers import end_job, free_port, without_chatter, worker_logs

WORKER = Path(__file__).with_name("sharded_worker.py")
# The job takes about 20-40 s on this 2-core machine (start-up, compiling, the scheduler).
JOB_TIMEOUT = 240


def make(sampling="local", capacity=7, sample_size=5, **kwargs) -> ShardedReplayBuffer:
    return ShardedReplayBuffer(sample_size, capacity, SHAPES, MS_DTYPES, sampling=sampling, names=NAMES, **kwargs)


def state_of(buffer) -> tuple:
    storage = buffer.storage if isinstance(buffer, ShardedReplayBuffer) else buffer
    return [c.asnumpy().copy() for c in storage.columns], int(storage.head), int(storage.count)


# ------------------------------------------------------------------ single process
@pytest.mark.parametrize("sampling", [pytest.param("local", marks=pytest.mark.slow), "global"])
def test_without_msrun_it_is_a_replay_buffer_of_world_size_one(sampling):
    draws = {}
    for kind in ("sharded", "plain"):
        ms.set_seed(1234)  # resets the kernels' seeds: both buffers draw the same sequence
        if kind == "sharded":
            buffer = make(sampling)
            assert (buffer.rank, buffer.world_size, buffer.local_capacity) == (0, 1, 7)
        else:
            buffer = ReplayBuffer(5, 7, SHAPES, MS_DTYPES, names=NAMES)
        model, start, draws[kind] = RingModel(7, SHAPES, DTYPES), 0, []
        for single, n in SEQUENCE:
            buffer.insert(encoded_batch(start, n, single=single == "single"))
            model.insert(encoded_batch(start, n))
            start += n
            columns, head, count = state_of(buffer)
            assert (head, count) == (model.head, model.count)
            for got, want in zip(columns, model.columns):
                np.testing.assert_array_equal(got, want)
            assert (int(buffer.size()), bool(buffer.full())) == (model.count, model.count == 7)
            if model.count:  # get_item reads the shard: all of it with one rank
                every = np.arange(-model.count, model.count)
                draws[kind].append(decode(*buffer.get_item(every)).tolist())
                logical, batch = buffer.sample_with_indices()
                draws[kind].append((logical.asnumpy().tolist(), decode(*batch).tolist(),
                                    decode(*buffer.sample(ordered=True)).tolist()))
        if kind == "sharded":
            assert int(buffer.local_size()) == model.count
        buffer.destroy()
        with pytest.raises(RuntimeError, match="destroyed"):
            buffer.insert(encoded_batch(0, 1))
    assert draws["sharded"] == draws["plain"]


def test_without_msrun_inside_a_cell_insert_then_sample_sees_the_rows():
    class Learner(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self, state, action, reward):
            _ = self.buffer.insert([state, action, reward])
            return self.buffer.size(), self.buffer.full(), self.buffer.local_size(), self.buffer.sample()

    buffer, model, start = make("global"), RingModel(7, SHAPES, DTYPES), 0
    learner = Learner(buffer)
    for n in [1, 3, 9, 2]:
        size, full, local_size, batch = learner(*(Tensor(x) for x in encoded_batch(start, n)))
        model.insert(encoded_batch(start, n))
        start += n
        assert (int(size), bool(full), int(local_size)) == (model.count, model.count == 7, model.count)
        assert set(decode(*batch)) <= set(range(start - model.count, start))


def test_shards_add_up_to_the_capacity_and_the_remainder_goes_to_the_first_ranks():
    assert shard_capacities(10, 4) == [3, 3, 2, 2]
    assert shard_capacities(65, 2) == [33, 32]
    assert shard_capacities(8, 8) == [1] * 8
    for capacity in range(3, 40):
        for world_size in range(1, 4):
            shards = shard_capacities(capacity, world_size)
            assert sum(shards) == capacity and max(shards) - min(shards) <= 1


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"sampling": "globl"}, ValueError, "'sampling' must be 'local' or 'global', but got 'globl'; did you mean global"),
    ({"sampling": 1}, TypeError, "'sampling' must be 'local' or 'global', but got int"),
    ({"sample_size": True}, TypeError, "For 'ShardedReplayBuffer', 'sample_size' must be an int"),
    ({"capacity": 0}, ValueError, "For 'ShardedReplayBuffer', 'capacity' must be an int >= 1"),
])
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        make(**kwargs)


def test_bad_calls_are_refused_and_leave_the_shard_unchanged():
    buffer = make("global")
    with pytest.raises(ValueError, match="the buffer is empty"):
        buffer.sample()
    buffer.insert(encoded_batch(0, 3))
    before = state_of(buffer)
    with pytest.raises(ValueError, match=r"shape of column 'state' must be \(2,\)"):
        buffer.insert([np.zeros((2, 5), np.float32), *encoded_batch(0, 2)[1:]])
    with pytest.raises(TypeError, match="'ordered' must be a bool or None"):
        buffer.sample(ordered=1)
    after = state_of(buffer)
    assert after[1:] == before[1:] and all(np.array_equal(a, b) for a, b in zip(after[0], before[0]))


def test_global_sampling_refuses_columns_that_cannot_travel_exactly():
    for dtype in (ms.float64, ms.uint64):
        with pytest.raises(ValueError, match=f"column 'column_1' must be one that travels exactly .* got {dtype}"):
            ShardedReplayBuffer(4, 8, [(2,), ()], [ms.float32, dtype], sampling="global")
        ShardedReplayBuffer(4, 8, [(2,), ()], [ms.float32, dtype], sampling="local")


def test_create_buffer_builds_it_from_a_config_entry():
    entry = {"number": 1, "type": "ShardedReplayBuffer", "capacity": 100, "data_shape": [(4,), (1,), (1,), (4,)],
             "data_type": [ms.float32, ms.int32, ms.float32, ms.float32], "sample_size": 64, "sampling": "global"}
    buffer = create_buffer(entry)
    assert isinstance(buffer, ShardedReplayBuffer)
    assert (buffer.sampling, buffer.capacity, buffer.sample_size) == ("global", 100, 64)
    assert [s.shape for s in buffer.specs] == [(4,), (1,), (1,), (4,)]
    with pytest.raises(ValueError, match="the key 'replace' does not apply to ShardedReplayBuffer"):
        create_buffer({**entry, "replace": False})
    with pytest.raises(ValueError, match="the key 'sampling' does not apply to ReplayBuffer"):
        create_buffer({**entry, "type": "ReplayBuffer"})


def test_save_and_load_restore_the_shard_in_place_after_compilation(tmp_path):
    class Sampler(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self):
            return self.buffer.size(), self.buffer.sample()

    buffer = make("global", sample_size=64)
    buffer.insert(encoded_batch(0, 10))  # wrapped: holds 3..9
    sampler = Sampler(buffer)
    sampler()  # compiled before the load
    saved = state_of(buffer)
    file = buffer.save(tmp_path / "buffer.ckpt")
    assert file == str(tmp_path / "buffer.rank0-of-1.ckpt") == shard_path(tmp_path / "buffer.ckpt", 0, 1)
    # a .safetensors name saves in that format (it had been written as .ckpt under a longer name)
    assert buffer.save(tmp_path / "buffer.safetensors") == str(tmp_path / "buffer.rank0-of-1.safetensors")
    assert (tmp_path / "buffer.rank0-of-1.safetensors").read_bytes()[8:9] == b"{"  # a safetensors header
    buffer.insert(encoded_batch(100, 4))
    buffer.reset()
    buffer.insert(encoded_batch(200, 2))
    buffer.load(tmp_path / "buffer.safetensors")
    assert state_of(buffer)[1:] == saved[1:]
    buffer.reset()
    buffer.load(tmp_path / "buffer.ckpt")
    restored = state_of(buffer)
    assert restored[1:] == saved[1:] and all(np.array_equal(a, b) for a, b in zip(restored[0], saved[0]))
    size, batch = sampler()
    assert int(size) == 7 and set(decode(*batch)) <= set(range(3, 10))
    assert set(decode(*buffer.sample())) <= set(range(3, 10))

    other = make("global", capacity=8)
    # The shard's own capacity is named as the storage's, not as a second 'capacity' of the buffer.
    with pytest.raises(ValueError, match=r"the capacity in .* must be 8 to match this buffer, but got 7; .*"
                                         r"the capacity of 'storage' in .* must be 8"):
        other.load(tmp_path / "buffer.ckpt")
    with pytest.raises(FileNotFoundError, match="no checkpoint file for this rank"):
        other.load(tmp_path / "nothing.ckpt")
    assert state_of(other)[1:] == (0, 0)


def test_a_rank_file_that_is_not_a_regular_file_is_refused_saying_what_it_is(tmp_path):
    # As every buffer's load refuses such a path: not as a missing rank file.
    (tmp_path / "folder.rank0-of-1.ckpt").mkdir()
    (tmp_path / "loop.rank0-of-1.ckpt").symlink_to(tmp_path / "loop.rank0-of-1.ckpt")
    os.mkfifo(tmp_path / "fifo.rank0-of-1.ckpt")
    (tmp_path / "whole.ckpt").mkdir()  # no rank file beside it: with one rank, the load reads the path itself
    cases = {"folder": ("folder.rank0-of-1.ckpt", "is a folder, not a file"),
             "loop": ("loop.rank0-of-1.ckpt", "cannot be examined: Too many levels of symbolic"),
             "fifo": ("fifo.rank0-of-1.ckpt", "must be a regular file, but it is a device, a FIFO or a socket"),
             "whole": ("whole.ckpt", "is a folder, not a file")}
    buffer = make()
    buffer.insert(encoded_batch(0, 3))
    saved = state_of(buffer)
    for name, (file, message) in cases.items():
        where = re.escape(str(tmp_path / file))
        with pytest.raises(ValueError, match=rf"^For 'load', the checkpoint file '{where}' {message}"):
            buffer.load(tmp_path / f"{name}.ckpt")
    after = state_of(buffer)
    assert after[1:] == saved[1:] and all(np.array_equal(a, b) for a, b in zip(after[0], saved[0]))


# ------------------------------------------------------------------ two ranks, msrun
def run_two_ranks(out: Path, timeout: float, script: Path = WORKER, args: list[str] | None = None) -> int | None:
    """Run ``script`` (default tests/sharded_worker.py) on 2 CPU ranks with msrun, within ``timeout`` seconds.

    Returns msrun's exit code, or None if it was killed at the timeout. Whatever msrun
    started is killed afterwards, by process id, whichever way the job ended.
    """
    bin_dir = Path(sys.executable).parent
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MS_", "RANK_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"  # msrun starts workers with the first python
    command = [str(bin_dir / "msrun"), "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
               f"--log_dir={out / 'logs'}", "--join=True", "--cluster_time_out=60", str(script),
               *([str(out)] if args is None else args)]
    with open(out / "msrun.log", "wb") as log:
        job = subprocess.Popen(command, env=env, cwd=out, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
        try:
            return job.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            end_job(job)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """Each rank's report of the 2-rank job, and the job's directory."""
    out = tmp_path_factory.mktemp("two_ranks")
    code = run_two_ranks(out, JOB_TIMEOUT)
    reports = [out / f"rank{rank}.json" for rank in range(2)]
    if code != 0 or not all(report.exists() for report in reports):
        logs = worker_logs(list((out / "logs").glob("worker_*.log")), out / "logs")
        ending = f"timed out after {JOB_TIMEOUT} s" if code is None else f"exit code {code}"
        pytest.fail(f"the 2-rank job failed ({ending}):\n{logs}")
    return [json.loads(report.read_text()) for report in reports], out


@pytest.mark.slow
@pytest.mark.whole_machine
def test_two_ranks_hold_shards_of_33_and_32_rows(two_ranks):
    ranks, _ = two_ranks
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert [r["local_capacity"] for r in ranks] == [[33, 33], [32, 32]]


@pytest.mark.slow
@pytest.mark.whole_machine
def test_an_empty_buffer_raises_on_every_rank_and_the_job_carries_on(two_ranks):
    ranks, _ = two_ranks
    errors = {r["empty_global_error"] for r in ranks}
    assert len(errors) == 1 and "the buffer is empty" in errors.pop()
    for r in ranks:
        assert f"the shard of rank {r['rank']} is empty" in r["empty_local_error"]
        assert r["empty_size"] == [0, False]
    # Every later step ran collectives: no rank was left behind in one.
    assert all(r["after_load"] for r in ranks)


@pytest.mark.slow
@pytest.mark.whole_machine
def test_a_rank_that_inserts_nothing_still_gets_the_global_batch(two_ranks):
    first, second = (r["one_sided"] for r in two_ranks[0])
    assert (first["size"], second["size"]) == (30, 30)
    assert (first["local_size"], second["local_size"]) == (30, 0)
    assert not first["full"] and not second["full"]
    assert first["global"] == second["global"]
    assert set(first["global"]) <= set(range(30))
    assert first["local_error"] is None and "the shard of rank 1 is empty" in second["local_error"]


@pytest.mark.slow
@pytest.mark.whole_machine
def test_local_sampling_touches_only_the_ranks_own_shard(two_ranks):
    ranks, _ = two_ranks
    assert set(ranks[0]["one_sided"]["local"]) <= set(range(30))
    for r in ranks:
        assert set(r["unequal"]["local"]) <= set(r["unequal"]["stored"])
        assert set(r["wrapped"]["local"]) <= set(r["wrapped"]["stored"])
        assert {i // 1000 for i in r["wrapped"]["local"]} == {r["rank"]}
    assert ranks[0]["wrapped"]["stored"] == list(range(37, 70))
    assert ranks[1]["wrapped"]["stored"] == list(range(1008, 1040))


@pytest.mark.slow
@pytest.mark.whole_machine
def test_global_samples_are_identical_on_every_rank(two_ranks):
    ranks, _ = two_ranks
    for phase in ("unequal", "wrapped"):
        assert ranks[0][phase]["global"] == ranks[1][phase]["global"]
        assert len(ranks[0][phase]["global"]) == 2000
    assert ranks[0]["unequal"]["ordered"] == ranks[1]["unequal"]["ordered"]
    assert ranks[0]["unequal"]["indexes"] == ranks[1]["unequal"]["indexes"]


@pytest.mark.slow
@pytest.mark.whole_machine
def test_global_samples_are_drawn_over_both_shards_in_proportion_to_their_counts(two_ranks):
    ranks, _ = two_ranks
    # 30 items on rank 0 and 10 on rank 1: 2000 draws, expected 50 per item, so a quarter of
    # the batch from rank 1. Seeds are fixed, so the test is deterministic; a p-value below
    # 1e-4 would mean a clearly non-uniform draw.
    unequal = np.asarray(ranks[0]["unequal"]["global"])
    items = list(range(30)) + list(range(1000, 1010))
    per_item = np.array([(unequal == i).sum() for i in items])
    assert per_item.sum() == 2000
    assert chisquare(per_item).pvalue > 1e-4
    from_rank1 = (unequal >= 1000).sum()
    assert chisquare([2000 - from_rank1, from_rank1], [1500, 500]).pvalue > 1e-4
    # Both shards full and wrapped: 65 items, 33 on rank 0 and 32 on rank 1.
    wrapped = np.asarray(ranks[0]["wrapped"]["global"])
    items = ranks[0]["wrapped"]["stored"] + ranks[1]["wrapped"]["stored"]
    assert set(wrapped) <= set(items)
    assert chisquare([(wrapped == i).sum() for i in items]).pvalue > 1e-4
    assert ranks[0]["wrapped"]["size"] == 65 and ranks[0]["wrapped"]["full"]


@pytest.mark.slow
@pytest.mark.whole_machine
def test_global_indexes_name_the_rows_in_shard_order(two_ranks):
    ranks, _ = two_ranks
    union = ranks[0]["unequal"]["stored"] + ranks[1]["unequal"]["stored"]
    assert [union[g] for g in ranks[0]["unequal"]["indexes"]] == ranks[0]["unequal"]["global"]
    ordered = ranks[0]["unequal"]["ordered"]
    assert ordered == sorted(ordered), "ordered: shard 0 oldest first, then shard 1"
    assert set(ordered) <= set(union)


@pytest.mark.slow
@pytest.mark.whole_machine
def test_inside_a_users_graph_every_rank_gets_the_same_batch_of_what_is_stored(two_ranks):
    ranks, _ = two_ranks
    assert ranks[0]["direct_before_graph"] == ranks[1]["direct_before_graph"] == [65, 6]
    for step, (first, second) in enumerate(zip(ranks[0]["in_graph"], ranks[1]["in_graph"])):
        assert first["global"] == second["global"] and first["indexes"] == second["indexes"]
        assert (first["size"], first["full"]) == (65, True) == (second["size"], second["full"])
        union = first["stored"] + second["stored"]
        assert [union[g] for g in first["indexes"]] == first["global"]
        # The step's own insert is in the shards the same graph sampled from.
        assert {500 + 2 * step, 1500 + 2 * step + 1} <= set(union)


@pytest.mark.slow
@pytest.mark.whole_machine
def test_global_rows_of_every_dtype_arrive_exactly(two_ranks):
    ranks, _ = two_ranks
    first, second = (r["mixed"] for r in ranks)
    assert first == second
    assert first["dtypes"] == ["uint8", "float16", "int64", "int8", "uint32"]
    items = set()
    for as_bytes, negated, wide, small, unsigned in first["rows"]:
        item = as_bytes[0]
        assert as_bytes == [item, item + 1, item + 2]
        assert (negated, wide, small, unsigned) == (-item, [item * 2**40 + 3, -(2**62) - item], -item,
                                                    2**32 - 1 - item)
        items.add(item)
    assert items <= {0, 1, 2, 3, 10, 11, 12, 13} and {i // 10 for i in items} == {0, 1}
    assert all(first["negative_zero"]) and first["negative_zero"], "-0.0 (item 0) keeps its sign"


@pytest.mark.slow
@pytest.mark.whole_machine
def test_save_writes_one_file_per_rank_and_load_restores_it(two_ranks):
    ranks, out = two_ranks
    for r in ranks:
        assert r["saved_file"] == str(out / "ckpt" / f"small.rank{r['rank']}-of-2.ckpt")
        assert r["restored"]
    union = ranks[0]["after_load_stored"] + ranks[1]["after_load_stored"]
    assert ranks[0]["after_load"] == ranks[1]["after_load"]
    assert set(ranks[0]["after_load"]) <= set(union) | {900, 1900}
    assert not (set(range(800, 805)) | set(range(1800, 1805))) & set(union), "load undid the inserts after save"


@pytest.mark.slow
@pytest.mark.whole_machine
def test_load_refuses_a_checkpoint_of_another_world_size(two_ranks):
    _, out = two_ranks
    buffer = ShardedReplayBuffer(6, 65, SHAPES, MS_DTYPES, sampling="global", names=NAMES)
    with pytest.raises(ValueError, match="was saved by a job of 2 ranks, but this job has 1"):
        buffer.load(out / "ckpt" / "small.ckpt")
    assert state_of(buffer)[1:] == (0, 0)


@pytest.mark.slow
@pytest.mark.whole_machine
def test_a_load_or_save_that_fails_on_one_rank_fails_on_both_and_changes_nothing(two_ranks):
    """mindspore_rl_buffer.shard_files: rank 1's file missing, rank 0's corrupt, rank 1's path a folder."""
    first, second = (r["agreed"] for r in two_ranks[0])
    cases = {"missing": ("FileNotFoundError", 1, "no checkpoint file for this rank at", "found no checkpoint file"),
             "corrupt": ("ValueError", 0, "is not a readable checkpoint", "refused its file"),
             "unwritable": ("ValueError", 1, "it is a folder, not a file", "cannot write its file")}
    for case, (kind, failing, cause, code) in cases.items():
        own, other = (second, first) if failing else (first, second)
        assert own[case][0] == other[case][0] == kind, (case, own[case], other[case])
        assert own[case][1].startswith("For '") and cause in own[case][1]  # the message one rank alone gives
        assert f"failed on rank {failing} of 2, so no rank" in own[case][1]
        assert f"failed on rank {failing} of 2, so no rank" in other[case][1]
        assert f"rank {failing} {code} '" in other[case][1] and cause not in other[case][1]
    assert first["unchanged"] and second["unchanged"] and first["kept"]
    assert first["leftovers"] == second["leftovers"] == []  # no pending file left
    assert first["size"] == second["size"]  # the next collective ran on both ranks


@pytest.mark.slow
@pytest.mark.whole_machine
def test_the_main_job_trains_data_parallel_on_two_ranks(tmp_path):
    """configs/dqn_data_parallel.py: each rank collects into its own shard from its own CartPoles
    and the gradients are averaged, so both ranks end with identical Q-networks (without the
    averaging their different data would make them differ)."""
    root = Path(__file__).resolve().parents[1]
    args = ["train", "--config", str(root / "configs" / "dqn_data_parallel.py"), "--no-progress",
            "--max-steps", "1600", "--out", str(tmp_path / "out")]
    code = run_two_ranks(tmp_path, JOB_TIMEOUT, script=root / "mindspore_rl_buffer" / "__main__.py", args=args)
    logs = [path.read_text(errors="replace") for path in sorted((tmp_path / "logs").glob("worker_*.log"))]
    assert code == 0, "\n".join(without_chatter(log)[-2000:] for log in logs)
    finals = [line for log in logs for line in log.splitlines() if line.startswith("final evaluation return")]
    assert len(finals) == 2 and finals[0] == finals[1]
    networks = [ms.load_checkpoint(str(tmp_path / "out" / f"rank{rank}" / "dqn_cartpole.ckpt")) for rank in range(2)]
    assert networks[0].keys() == networks[1].keys() and networks[0]
    for name in networks[0]:
        np.testing.assert_array_equal(networks[0][name].asnumpy(), networks[1][name].asnumpy())


class _PushesColumns(nn.Cell):
    """``insert(state, action)`` (one tensor per column) inside a graph, as ReplayBuffer takes it."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, state, step):
        _ = self.buffer.insert(state, step)
        return self.buffer.size()


def test_insert_takes_one_tensor_per_column_and_push_like_a_replay_buffer():
    buffer = ShardedReplayBuffer(2, 8, [(2,), ()], [ms.float32, ms.int32])
    buffer.insert(np.full(2, 1.0, np.float32), np.int32(1))
    buffer.push(np.full(2, 2.0, np.float32), np.int32(2))
    assert int(_PushesColumns(buffer)(Tensor(np.full(2, 3.0, np.float32)), Tensor(3, ms.int32))) == 3
    assert [int(buffer.storage.get_item(i)[1]) for i in range(3)] == [1, 2, 3]
    with pytest.raises(TypeError, match=r"'transition' must be a list or tuple"):
        buffer.insert(np.full(2, 4.0, np.float32))
    assert int(buffer.size()) == 3


@pytest.mark.parametrize("kwargs, error, message", [
    ({"seed": -1}, ValueError, r"^For 'ShardedReplayBuffer', 'seed' must be an int >= 0, but got -1\.$"),
    ({"ordered": "yes"}, TypeError, r"^For 'ShardedReplayBuffer', 'ordered' must be a bool, but got str\.$"),
    ({"names": "ab"}, TypeError, r"^For 'ShardedReplayBuffer', 'names' must be a list of str, but got str\.$"),
    ({"names": ["a", "size"]}, ValueError, r"^For 'ShardedReplayBuffer', the column name 'size' is taken"),
])
def test_constructor_errors_name_the_sharded_buffer(kwargs, error, message):
    with pytest.raises(error, match=message):  # they named the shard's ReplayBuffer
        ShardedReplayBuffer(2, 8, [(2,), ()], [ms.float32, ms.int32], **kwargs)


def test_a_numpy_integer_seed_is_kept_as_an_int_and_the_shard_saves(tmp_path):
    buffer = ShardedReplayBuffer(2, 8, [(2,), ()], [ms.float32, ms.int32], seed=np.int64(5))
    buffer.insert([np.ones((3, 2), np.float32), np.arange(3, dtype=np.int32)])
    buffer.save(tmp_path / "b.ckpt")
    buffer.load(tmp_path / "b.ckpt")
    assert int(buffer.size()) == 3
