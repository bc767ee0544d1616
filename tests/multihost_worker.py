"""One rank of the two-node rehearsal that tests/test_multihost.py launches: two msrun processes
on 127.0.0.1, one per node, one rank each.

Run as ``msrun --worker_num=2 --local_worker_num=1 --node_rank=N ... tests/multihost_worker.py
NODE_DIR``; each rank writes what it saw to ``NODE_DIR/rank<r>.json``, its checkpoint under
``NODE_DIR/ckpt`` (one folder per node, as on two hosts). Items inserted on rank ``r`` are
numbered ``1000 * r + i`` and encoded in every column (``tests/helpers.py``).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mindspore_rl_buffer import ShardedReplayBuffer  # noqa: E402
from tests.helpers import MS_DTYPES, NAMES, SHAPES, decode, encoded_batch  # noqa: E402

CAPACITY = 21  # shards of 11 and 10 rows


def stored(buffer) -> list[int]:
    """The item numbers in this rank's shard, oldest first."""
    count = int(buffer.local_size())
    if count == 0:
        return []
    return ids(buffer.get_item(Tensor(np.arange(count, dtype=np.int32))))


def ids(batch) -> list[int]:
    return decode(*(x.asnumpy() for x in batch)).tolist()


def state_of(buffer) -> list:
    storage = buffer.storage
    return [[c.asnumpy().tolist() for c in storage.columns], int(storage.head), int(storage.count)]


def timed_failure(call) -> dict:
    """The error ``call()`` raised, and the seconds from the call to the raise."""
    start = time.monotonic()
    try:
        call()
    except Exception as error:  # the report names whatever was raised
        return {"type": type(error).__name__, "message": str(error), "seconds": time.monotonic() - start}
    return {"type": None, "message": None, "seconds": time.monotonic() - start}


def main(node_dir: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    buffer = ShardedReplayBuffer(64, CAPACITY, SHAPES, MS_DTYPES, sampling="global", names=NAMES)
    rank = buffer.rank
    seen: dict = {"rank": rank, "world_size": buffer.world_size, "local_capacity": buffer.local_capacity}

    # Sampling: 8 items on rank 0, 4 on rank 1; every rank gets the same global batch.
    buffer.insert(encoded_batch(1000 * rank, 8 if rank == 0 else 4))
    seen["size"] = int(buffer.size())
    seen["stored"] = stored(buffer)
    seen["global"] = ids(buffer.sample())
    seen["ordered"] = ids(buffer.sample(ordered=True))

    # Save into this node's folder, change the shard, load it back.
    path = node_dir / "ckpt" / "buffer.safetensors"
    before = state_of(buffer)
    seen["saved_file"] = buffer.save(path)
    buffer.insert(encoded_batch(1000 * rank + 500, 3))
    buffer.load(path)
    seen["restored"] = state_of(buffer) == before
    seen["after_load_size"] = int(buffer.size())

    # Rank 1's file is missing on its host: both ranks raise, and no shard changes.
    buffer.insert(encoded_batch(1000 * rank + 600, 2))
    changed = state_of(buffer)
    if rank == 1:
        os.remove(seen["saved_file"])
    seen["missing"] = timed_failure(lambda: buffer.load(path))
    seen["missing"]["unchanged"] = state_of(buffer) == changed
    # The job carries on: the next collective calls complete on both ranks.
    seen["after_failure"] = {"size": int(buffer.size()), "global": ids(buffer.sample())}

    (node_dir / f"rank{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
