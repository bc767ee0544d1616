"""A two-host job rehearsed on one machine: two msrun processes on 127.0.0.1, one node each.

Each node runs one rank of ``tests/multihost_worker.py`` (2x1, ranks fixed by ``--node_rank``)
and keeps its files in its own folder, as two hosts would. Both msrun processes start a
scheduler on loopback and the second one exits with status 1 once its worker is done (msrun's
doing), so the job is judged by what the workers wrote, not by msrun's exit status.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mindspore_rl_buffer.files import shard_path
from tests.msrun_helpers import end_job, free_port, worker_logs

WORKER = Path(__file__).with_name("multihost_worker.py")
# Two workers start, compile and run in about 30-60 s on this 2-core machine.
JOB_TIMEOUT = 240
# The missing file must surface on both ranks at once, not after a collective's time-out (about 30 s).
FAILURE_SECONDS = 15


def run_two_nodes(root: Path, timeout: float) -> list[int | None]:
    """Run the worker as two msrun nodes of one rank each; each node's folder is ``root/node<n>``.

    Returns each msrun's exit code (None if killed at the timeout). Whatever they started is
    killed afterwards, by process id.
    """
    bin_dir = Path(sys.executable).parent
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MS_", "RANK_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"  # msrun starts workers with the first python
    port, jobs = free_port(), []
    try:
        for node in (0, 1):
            folder = root / f"node{node}"
            folder.mkdir()
            command = [str(bin_dir / "msrun"), "--worker_num=2", "--local_worker_num=1", f"--node_rank={node}",
                       "--master_addr=127.0.0.1", f"--master_port={port}", f"--log_dir={folder / 'logs'}",
                       "--join=True", "--cluster_time_out=60", str(WORKER), str(folder)]
            with open(folder / "msrun.log", "wb") as log:
                jobs.append(subprocess.Popen(command, env=env, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True))
        deadline = time.monotonic() + timeout
        codes = []
        for job in jobs:
            try:
                codes.append(job.wait(timeout=max(deadline - time.monotonic(), 0)))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes
    finally:
        for job in jobs:
            end_job(job)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """Each rank's report (rank 0 from node 0's folder, rank 1 from node 1's), and the job's folder."""
    root = tmp_path_factory.mktemp("two_nodes")
    codes = run_two_nodes(root, JOB_TIMEOUT)
    reports = [root / f"node{rank}" / f"rank{rank}.json" for rank in range(2)]
    if not all(report.exists() for report in reports):
        logs = worker_logs(list(root.glob("node*/logs/*.log")), root)
        pytest.fail(f"the two-node job wrote no report for every rank (msrun exit codes {codes}):\n{logs}")
    return [json.loads(report.read_text()) for report in reports], root


@pytest.mark.slow
@pytest.mark.whole_machine
def test_each_node_runs_its_own_rank(two_nodes):
    ranks, _ = two_nodes
    assert [(r["rank"], r["world_size"], r["local_capacity"]) for r in ranks] == [(0, 2, 11), (1, 2, 10)]


@pytest.mark.slow
@pytest.mark.whole_machine
def test_global_batches_are_equal_on_both_nodes_and_drawn_over_both_shards(two_nodes):
    first, second = two_nodes[0]
    assert first["size"] == second["size"] == 12
    assert first["stored"] == list(range(8)) and second["stored"] == list(range(1000, 1004))
    assert first["global"] == second["global"] and first["ordered"] == second["ordered"]
    union = set(first["stored"]) | set(second["stored"])
    assert set(first["global"]) <= union
    # 64 draws over 12 items, 4 of them on rank 1: all 64 missing one shard has probability
    # (8/12)**64 + (4/12)**64, below 1e-11.
    assert any(item < 1000 for item in first["global"]) and any(item >= 1000 for item in first["global"])
    assert first["ordered"] == sorted(first["ordered"])  # shard 0 first, oldest first within each


@pytest.mark.slow
@pytest.mark.whole_machine
def test_save_writes_each_ranks_file_on_its_own_node_and_load_restores_it(two_nodes):
    ranks, root = two_nodes
    for r in ranks:
        node = root / f"node{r['rank']}"
        assert r["saved_file"] == shard_path(node / "ckpt" / "buffer.safetensors", r["rank"], 2)
        assert r["restored"] and r["after_load_size"] == 12
    assert not list((root / "node0" / "ckpt").glob("*rank1-of-2*"))
    assert not list((root / "node0" / "ckpt").glob(".*"))  # no pending file left behind


@pytest.mark.slow
@pytest.mark.whole_machine
def test_a_file_missing_on_one_node_fails_the_load_on_both_ranks_at_once(two_nodes):
    ranks, root = two_nodes
    missing = shard_path(root / "node1" / "ckpt" / "buffer.safetensors", 1, 2)
    for r in ranks:
        failure = r["missing"]
        assert failure["type"] == "FileNotFoundError", failure
        assert failure["seconds"] < FAILURE_SECONDS, failure
        assert "failed on rank 1 of 2, so no rank loaded its shard" in failure["message"]
        assert failure["unchanged"], "a failed load changed a shard"
        assert r["after_failure"]["size"] == 16  # both ranks reached the next collective
    own, other = ranks[1]["missing"]["message"], ranks[0]["missing"]["message"]
    assert own.startswith(f"For 'load', no checkpoint file for this rank at '{missing}'.")  # as with one rank
    assert other.startswith("For 'load', the load of ")
    assert "rank 1 found no checkpoint file 'buffer.rank1-of-2.safetensors' on its host" in other
    assert ranks[0]["after_failure"]["global"] == ranks[1]["after_failure"]["global"]
