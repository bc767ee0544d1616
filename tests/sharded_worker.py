"""One rank of the 2-rank job that tests/test_sharded.py launches with msrun.

Run as ``msrun --worker_num=2 --local_worker_num=2 tests/sharded_worker.py OUT_DIR``; each rank
writes what it saw to ``OUT_DIR/rank<r>.json`` and the test compares the ranks. Items
inserted on rank ``r`` are numbered ``1000 * r + i`` (encoded in every column, see
``tests/helpers.py``), so a row's number tells its shard and whether it is intact.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mindspore_rl_buffer import ShardedReplayBuffer  # noqa: E402
from tests.helpers import SHAPES, decode, encoded_batch  # noqa: E402

TYPES = [ms.float32, ms.int32, ms.float32]
NAMES = ["state", "action", "reward"]
CAPACITY = 65  # shards of 33 and 32 rows: the remainder goes to rank 0


class Learner(nn.Cell):
    """A user's graph: insert this rank's batch, then a global sample and the global size."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action, reward):
        _ = self.buffer.insert([state, action, reward])
        indexes, batch = self.buffer.sample_with_indices()
        return self.buffer.size(), self.buffer.full(), indexes, batch


def ids(batch) -> list[int]:
    return decode(*(x.asnumpy() for x in batch)).tolist()


def stored(buffer) -> list[int]:
    """The item numbers in this rank's shard, in logical order (oldest first)."""
    count = int(buffer.local_size())
    if count == 0:
        return []
    return ids(buffer.storage.get_item(Tensor(np.arange(count, dtype=np.int32))))


def attempt(call) -> str | None:
    """The error message of ``call()``, or None if it returned."""
    try:
        call()
    except ValueError as error:
        return str(error)
    return None


def failure(call) -> list:
    """The type and message of the error ``call()`` raised (None if it returned)."""
    try:
        call()
    except Exception as error:  # the test names what was raised
        return [type(error).__name__, str(error)]
    return [None, None]


def state_of(buffer) -> list:
    return [[c.asnumpy().tolist() for c in buffer.storage.columns], int(buffer.storage.head),
            int(buffer.storage.count)]


def insert(buffers, rank: int, start: int, n: int) -> None:
    for buffer in buffers:
        buffer.insert(encoded_batch(1000 * rank + start, n))


def main(out: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    glob = ShardedReplayBuffer(2000, CAPACITY, SHAPES, TYPES, sampling="global", names=NAMES)
    rank = glob.rank
    ms.set_seed(100 + rank)  # ranks seeded differently: global draws must agree all the same
    local = ShardedReplayBuffer(400, CAPACITY, SHAPES, TYPES, sampling="local", names=NAMES)
    small = ShardedReplayBuffer(6, CAPACITY, SHAPES, TYPES, sampling="global", names=NAMES)
    seen: dict = {"rank": rank, "world_size": glob.world_size,
                  "local_capacity": [glob.local_capacity, local.local_capacity]}

    # Empty everywhere: a global sample raises on every rank, and the job carries on.
    seen["empty_global_error"] = attempt(glob.sample)
    seen["empty_local_error"] = attempt(local.sample)
    seen["empty_size"] = [int(glob.size()), bool(glob.full())]

    # Only rank 0 inserts: rank 1 holds nothing.
    if rank == 0:
        insert([glob, local, small], rank, 0, 30)
    seen["one_sided"] = {"size": int(glob.size()), "local_size": int(glob.local_size()),
                         "full": bool(glob.full()), "global": ids(glob.sample()),
                         "local_error": attempt(local.sample)}
    if rank == 0:
        seen["one_sided"]["local"] = ids(local.sample())

    # Unequal fill: 30 items on rank 0, 10 on rank 1.
    if rank == 1:
        insert([glob, local, small], rank, 0, 10)
    indexes, batch = glob.sample_with_indices()
    seen["unequal"] = {"size": int(glob.size()), "local_size": int(glob.local_size()), "stored": stored(glob),
                       "global": ids(batch), "indexes": indexes.asnumpy().tolist(),
                       "ordered": ids(glob.sample(ordered=True)), "local": ids(local.sample())}

    # Both shards wrap: rank 0 keeps items 37..69 (33 rows), rank 1 items 1008..1039 (32 rows).
    insert([glob, local, small], rank, 30 if rank == 0 else 10, 40 if rank == 0 else 30)
    seen["wrapped"] = {"size": int(glob.size()), "full": bool(glob.full()), "global": ids(glob.sample()),
                       "stored": stored(glob),
                       "local": ids(local.sample())}

    # Inside a user's compiled graph: insert 2 items per rank, then sample globally. The
    # direct calls first build the buffer's own helper graphs, which must not disturb it.
    seen["direct_before_graph"] = [int(small.size()), len(ids(small.sample()))]
    learner = Learner(small)
    steps = []
    for step in range(3):
        batch = encoded_batch(1000 * rank + 500 + 2 * step, 2)
        size, full, indexes, sampled = learner(*(Tensor(x) for x in batch))
        steps.append({"size": int(size), "full": bool(full), "indexes": indexes.asnumpy().tolist(),
                      "global": ids(sampled), "stored": stored(small)})
    seen["in_graph"] = steps

    # Save, change, load: the shard is back, and the compiled graphs see it.
    before = [c.asnumpy().tolist() for c in small.storage.columns], int(small.storage.head), \
        int(small.storage.count)
    seen["saved_file"] = small.save(out / "ckpt" / "small.ckpt")
    insert([small], rank, 800, 5)
    small.load(out / "ckpt" / "small.ckpt")
    after = [c.asnumpy().tolist() for c in small.storage.columns], int(small.storage.head), \
        int(small.storage.count)
    seen["restored"] = before == after
    seen["after_load_stored"] = stored(small)
    seen["after_load"] = ids(learner(*(Tensor(x) for x in encoded_batch(1000 * rank + 900, 1)))[3])

    # All or nothing: a rank whose file is missing or corrupt, or cannot be written, fails the
    # load or save on both ranks at once, and no shard or earlier file changes.
    agreed = out / "ckpt" / "agreed.ckpt"
    own = Path(small.save(agreed))
    insert([small], rank, 950, 2)
    changed = state_of(small)
    if rank == 1:
        own.unlink()
    seen["agreed"] = {"missing": failure(lambda: small.load(agreed))}
    small.save(agreed)
    if rank == 0:
        own.write_bytes(own.read_bytes()[:100])
    seen["agreed"]["corrupt"] = failure(lambda: small.load(agreed))
    seen["agreed"]["unchanged"] = state_of(small) == changed
    kept = own.read_bytes()
    if rank == 1:
        own.unlink()
        own.mkdir()
    seen["agreed"]["unwritable"] = failure(lambda: small.save(agreed))
    seen["agreed"]["kept"] = rank == 1 or own.read_bytes() == kept
    seen["agreed"]["leftovers"] = sorted(path.name for path in own.parent.glob(f".{own.stem}.*"))  # pending
    seen["agreed"]["size"] = int(small.size())

    # Dtypes the CPU AllGather refuses (uint8, int8) or rounds (int64), and -0.0 (which a sum
    # would not keep): rank r's item i = 10 * r + j is encoded in every column.
    mixed = ShardedReplayBuffer(64, 8, [(3,), (), (2,), (), ()], [ms.uint8, ms.float16, ms.int64, ms.int8, ms.uint32],
                                sampling="global")
    item = np.arange(4) + 10 * rank
    mixed.insert([np.stack([item, item + 1, item + 2], 1).astype(np.uint8), -item.astype(np.float16),
                  np.stack([item * 2**40 + 3, -(2**62) - item], 1).astype(np.int64), (-item).astype(np.int8),
                  (2**32 - 1 - item).astype(np.uint32)])
    columns = [column.asnumpy() for column in mixed.sample()]
    seen["mixed"] = {"dtypes": [str(column.dtype) for column in columns],
                     "rows": [[column[j].tolist() for column in columns] for j in range(64)],
                     "negative_zero": [bool(np.signbit(x)) for x in columns[1] if x == 0]}

    (out / f"rank{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    np.set_printoptions(threshold=50)
    main(Path(sys.argv[1]))
