"""``train``'s compile cache: one folder per setting, shared by every seed, published when a run ends."""
from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.dqn import compile_cache
from mindspore_rl_buffer.apps.dqn.compile_cache import CacheFolder, default_root, setting_key
from tests.apps.dqn.helpers import ROOT


def test_the_setting_key_tells_apart_everything_that_shapes_the_graphs_but_not_the_seed():
    config = load_config(ROOT / "configs" / "dqn_nstep.py")
    key = setting_key(config, "device", "mindspore", "fused")
    assert key == setting_key(copy.deepcopy(config), "device", "mindspore", "fused") and len(key) == 16
    wider = copy.deepcopy(config)
    wider["policy"]["hidden_sizes"] = (64, 64)
    reseeded = copy.deepcopy(config)
    reseeded["trainer"]["seed"] = 7  # the config's seed is read as it is: a config that names another seed differs
    others = {setting_key(config, "device", "mindspore", "host"), setting_key(wider, "device", "mindspore", "fused"),
              setting_key(config, "numpy", "mindspore", "fused"), setting_key(reseeded, "device", "mindspore", "fused")}
    assert key not in others and len(others) == 4


def test_the_default_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MSRB_COMPILE_CACHE", str(tmp_path / "graphs"))
    assert default_root() == tmp_path / "graphs"
    for off in ("off", "OFF", ""):
        monkeypatch.setenv("MSRB_COMPILE_CACHE", off)
        assert default_root() is None
    monkeypatch.delenv("MSRB_COMPILE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_root() == tmp_path / "xdg" / "mindspore_rl_buffer" / "compile"


def test_a_pending_folder_is_published_once_and_a_later_one_is_dropped(tmp_path):
    final = tmp_path / "0123456789abcdef"
    first, second = (final.with_name(f"{final.name}.pending-{n}") for n in (1, 2))
    for pending, graph in ((first, "a"), (second, "b")):
        pending.mkdir()
        (pending / "graph").write_text(graph)
    CacheFolder(first, final).publish()
    CacheFolder(second, final).publish()  # finished later: the published folder is kept as it is
    assert (final / "graph").read_text() == "a" and not first.exists() and not second.exists()
    CacheFolder(final, final).publish()  # a run that loaded: nothing to publish
    assert (final / "graph").read_text() == "a"


def test_a_pending_folder_is_discarded_by_a_run_that_did_not_finish_and_a_published_one_is_kept(tmp_path):
    final = tmp_path / "0123456789abcdef"
    pending = final.with_name(f"{final.name}.pending-1")
    for folder in (pending, final):
        folder.mkdir()
    CacheFolder(pending, final).discard()
    CacheFolder(final, final).discard()  # a run that loaded the published graphs leaves them
    assert not pending.exists() and final.is_dir()


def test_a_run_removes_the_pending_folders_of_killed_runs_and_keeps_a_running_ones(tmp_path, monkeypatch):
    config = load_config(ROOT / "configs" / "dqn_nstep.py")
    monkeypatch.setattr(compile_cache.ms, "set_context", lambda **kwargs: None)
    final = tmp_path / setting_key(config, "device", "mindspore", "fused")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    killed, running = (final.with_name(f"{final.name}.pending-{pid}") for pid in (dead.stdout.strip(), os.getppid()))
    other = tmp_path / "fedcba9876543210.pending-1"  # another setting's: not this run's to judge
    for folder in (killed, running, other):
        folder.mkdir()
    cache = compile_cache.use_compile_cache(tmp_path, config, "device", "mindspore", "fused")
    assert not killed.exists() and running.is_dir() and other.is_dir() and cache.path.is_dir()


def test_a_run_compiles_into_a_pending_folder_and_loads_a_published_one(tmp_path, monkeypatch):
    config = load_config(ROOT / "configs" / "dqn_nstep.py")
    monkeypatch.setattr(compile_cache.ms, "set_context", lambda **kwargs: None)  # nothing turned on here
    cache = compile_cache.use_compile_cache(tmp_path, config, "device", "mindspore", "fused")
    assert not cache.loads and cache.path.name == f"{cache.final.name}.pending-{os.getpid()}" and cache.path.is_dir()
    cache.publish()
    again = compile_cache.use_compile_cache(tmp_path, config, "device", "mindspore", "fused")
    assert again.loads and again.path == cache.final


@pytest.mark.slow
def test_a_run_loading_another_seeds_graphs_trains_the_same_weights_as_compiling_its_own(tmp_path):
    cache = tmp_path / "cache"

    def train(name: str, seed: int, *cache_args: str) -> bytes:
        command = [sys.executable, "-m", "mindspore_rl_buffer", "train", "--seed", str(seed), "--max-steps", "1600",
                   "--out", str(tmp_path / name), "--no-progress", *cache_args]
        subprocess.run(command, cwd=tmp_path, check=True, capture_output=True, timeout=600)
        return (tmp_path / name / "dqn_cartpole.ckpt").read_bytes()

    compiled = train("compiled", 1, "--no-compile-cache")
    stored = train("stored", 2, "--compile-cache", str(cache))
    (folder,) = cache.iterdir()  # published under the setting's name; no pending folder is left
    assert ".pending-" not in folder.name
    files = sorted((path, path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file())
    assert files
    assert train("loaded", 1, "--compile-cache", str(cache)) == compiled  # seed 2's graphs, seed 1's weights
    assert sorted((path, path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file()) == files
    assert stored != compiled  # the seeds train apart: the graphs carry none


def test_a_data_parallel_config_is_refused_before_anything_is_built(tmp_path, capsys):
    from mindspore_rl_buffer.apps.dqn import cli

    status = cli.main(["train", "--config", str(ROOT / "configs" / "dqn_data_parallel.py"), "--out",
                       str(tmp_path / "run"), "--compile-cache", str(tmp_path / "cache")])
    assert status == 2
    assert "--compile-cache is for single-process runs" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists() and not (tmp_path / "run").exists()


def test_the_cache_options_exclude_each_other(tmp_path, capsys):
    from mindspore_rl_buffer.apps.dqn import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--compile-cache", str(tmp_path), "--no-compile-cache"])
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
