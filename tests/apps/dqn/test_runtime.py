"""``train``'s CPU runtime threads: a second actor thread where MindSpore's default gives one."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mindspore_rl_buffer.apps.dqn import runtime
from mindspore_rl_buffer.apps.dqn.runtime import default_actor_threads, pipeline_cpu_runtime
from tests.apps.dqn.helpers import ROOT


@pytest.fixture
def setters(monkeypatch):
    """MindSpore's two setters, recorded instead of called: a process may call each only once."""
    calls: dict[str, list[int]] = {"dispatch": [], "kernels": []}

    def recorder(name, refuse=False):
        def record(num):
            if refuse:
                raise RuntimeError(f"The '{name}' can not be set repeatedly.")
            calls[name].append(num)
        return record

    def use(refuse_dispatch=False, refuse_kernels=False):
        monkeypatch.setattr(runtime.ms.runtime, "dispatch_threads_num", recorder("dispatch", refuse_dispatch))
        monkeypatch.setattr(runtime.ms.device_context.cpu.op_tuning, "threads_num", recorder("kernels", refuse_kernels))
        return calls

    return use


def test_mindspore_gives_one_actor_thread_below_12_cores():
    # 18% of min(30, cores), rounded down, at least one (MindSpore 2.10's runtime_conf.cc)
    expected = {cores: max(int(min(30, cores) * 18) // 100, 1) for cores in range(1, 200)}
    assert {cores: default_actor_threads(cores) for cores in expected} == expected
    assert max(cores for cores in expected if default_actor_threads(cores) == 1) == 11


@pytest.mark.parametrize(("cores", "kernels"), [(2, 1), (3, 1), (4, 2), (11, 9)])
def test_below_12_cores_two_actor_threads_and_the_rest_for_kernels(setters, cores, kernels):
    calls = setters()
    assert pipeline_cpu_runtime(cores) == (2, kernels)
    assert calls == {"dispatch": [2], "kernels": [kernels]}


@pytest.mark.parametrize("cores", [1, 12, 64])
def test_nothing_is_set_where_a_second_actor_thread_is_the_default_or_impossible(setters, cores):
    calls = setters()
    assert pipeline_cpu_runtime(cores) is None
    assert calls == {"dispatch": [], "kernels": []}


def test_nothing_is_set_off_the_cpu(setters, monkeypatch):
    calls = setters()
    monkeypatch.setattr(runtime.ms, "get_context", lambda key: {"device_target": "GPU"}[key])
    assert pipeline_cpu_runtime(2) is None
    assert calls == {"dispatch": [], "kernels": []}


def test_a_choice_the_process_made_before_stands(setters):
    calls = setters(refuse_dispatch=True)
    assert pipeline_cpu_runtime(2) is None
    assert calls == {"dispatch": [], "kernels": []}  # the kernel threads are left alone too
    calls = setters(refuse_kernels=True)
    assert pipeline_cpu_runtime(2) == (2, None)
    assert calls["dispatch"] == [2]


TRAIN = """
import sys
import numpy as np
import mindspore as ms
from mindspore import Tensor

ms.set_context(mode=ms.GRAPH_MODE)
if sys.argv[1] == "pipelined":
    from mindspore_rl_buffer.apps.dqn.runtime import pipeline_cpu_runtime
    assert pipeline_cpu_runtime(cores=2) == (2, 1)
from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.dqn.agent import build_agent

config = load_config("configs/dqn_nstep.py")
agent = build_agent(config, "device", "mindspore", 0)
warm = config["trainer"]["learning_starts"] // config["environment"]["num_envs"]
agent.train_loop(Tensor(warm, ms.int32), Tensor(0, ms.int32)).asnumpy()
agent.train_loop(Tensor(600, ms.int32), Tensor(agent.learn_calls, ms.int32)).asnumpy()
np.savez(sys.argv[2], **{name: p.asnumpy() for name, p in agent.train_loop.parameters_and_names()})
"""


@pytest.mark.slow
def test_the_pipelined_runtime_trains_what_the_default_one_does(tmp_path):
    """600 iterations (1,200 updates, several target syncs) in each runtime: the weights, Adam's moments and the
    stored transitions agree, bit for bit but for values below float32's smallest normal number, which MindSpore's
    threads may flush to zero or keep."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    arrays = {}
    for kind in ("default", "pipelined"):
        subprocess.run([sys.executable, str(script), kind, str(tmp_path / kind)], check=True, cwd=ROOT, timeout=600,
                       capture_output=True)
        with np.load(tmp_path / f"{kind}.npz") as saved:
            arrays[kind] = {name: saved[name] for name in saved.files}
    tiny = np.finfo(np.float32).tiny
    assert arrays["default"].keys() == arrays["pipelined"].keys()
    assert {"moment1", "buffer", "target_net"} <= {part for name in arrays["default"] for part in name.split(".")}
    for name, default in arrays["default"].items():
        pipelined = arrays["pipelined"][name]
        assert default.shape == pipelined.shape, name
        apart = default != pipelined
        assert (np.abs(default[apart]) < tiny).all() and (np.abs(pipelined[apart]) < tiny).all(), name


class BuiltError(Exception):
    """Raised in place of training or playing."""


@pytest.mark.parametrize(("argv", "pipelined"), [
    (["train"], True),
    (["train", "--config", "configs/dqn.py", "--loop", "host"], True),
    (["train", "--config", "configs/dqn_atari.py"], False),  # large convolutions: MindSpore's default pool
    (["train", "--config", "configs/dqn_data_parallel.py"], False),  # ranks share the cores
    (["evaluate", "--checkpoint", "model.ckpt"], True),
])
def test_the_command_sets_the_threads_before_it_builds_anything_for_one_cartpole_process(
        tmp_path, monkeypatch, argv, pipelined):
    from mindspore_rl_buffer.apps.atari import trainer as atari_trainer
    from mindspore_rl_buffer.apps.dqn import cli, play, trainer

    order = []

    def record(name):
        def call(*args, **kwargs):
            order.append(name)
            if name != "threads":
                raise BuiltError
        return call

    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.ckpt").write_bytes(b"")
    monkeypatch.setattr(runtime, "pipeline_cpu_runtime", record("threads"))
    for module, name in ((trainer, "train"), (atari_trainer, "train"), (play, "evaluate_checkpoint")):
        monkeypatch.setattr(module, name, record("built"))
    with pytest.raises(BuiltError):
        cli.main([*argv, "--out", str(tmp_path / "run")] if argv[0] == "train" else argv)
    assert order == (["threads", "built"] if pipelined else ["built"])
