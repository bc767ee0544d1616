"""``train --compile-cache DIR``: a later run of the same setting loads the graphs and trains bit for bit alike."""
from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.dqn.compile_cache import setting_key
from tests.apps.dqn.helpers import ROOT


def test_the_setting_key_tells_apart_everything_that_shapes_the_graphs():
    config = load_config(ROOT / "configs" / "dqn_nstep.py")
    key = setting_key(config, 0, "device", "mindspore", "fused")
    assert key == setting_key(copy.deepcopy(config), 0, "device", "mindspore", "fused") and len(key) == 16
    wider = copy.deepcopy(config)
    wider["policy"]["hidden_sizes"] = (64, 64)
    others = {setting_key(config, 1, "device", "mindspore", "fused"),
              setting_key(config, 0, "device", "mindspore", "host"),
              setting_key(wider, 0, "device", "mindspore", "fused")}
    assert key not in others and len(others) == 3


@pytest.mark.slow
def test_a_later_run_of_the_same_setting_loads_the_graphs_and_trains_the_same_weights(tmp_path):
    cache = tmp_path / "cache"

    def train(name: str, seed: int) -> bytes:
        command = [sys.executable, "-m", "mindspore_rl_buffer", "train", "--seed", str(seed), "--max-steps", "1600",
                   "--out", str(tmp_path / name), "--no-progress", "--compile-cache", str(cache)]
        subprocess.run(command, cwd=tmp_path, check=True, capture_output=True, timeout=600)
        return (tmp_path / name / "dqn_cartpole.ckpt").read_bytes()

    compiled = train("compiled", 1)
    (folder,) = cache.iterdir()
    stored = sorted((path, path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file())
    assert stored
    assert train("loaded", 1) == compiled  # the same weights, bit for bit
    assert sorted((path, path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file()) == stored
    other = train("other_seed", 2)  # its own folder: the stored graphs carry seed 1's random streams
    assert len(list(cache.iterdir())) == 2 and other != compiled


def test_a_data_parallel_config_is_refused_before_anything_is_built(tmp_path, capsys):
    from mindspore_rl_buffer.apps.dqn import cli

    status = cli.main(["train", "--config", str(ROOT / "configs" / "dqn_data_parallel.py"), "--out",
                       str(tmp_path / "run"), "--compile-cache", str(tmp_path / "cache")])
    assert status == 2
    assert "--compile-cache is for single-process runs" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists() and not (tmp_path / "run").exists()
