"""The command line's rough edges: budgets, earlier runs, configs that are not the trainer's, the loop flag,
and the evaluate command."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import mindspore as ms
import numpy as np
import pytest

from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.dqn import cli
from mindspore_rl_buffer.apps.dqn.networks import QNetwork, save_q_network
from tests.apps.dqn.helpers import CONFIG, ROOT
from tests.helpers import refuse_to_open


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)


def _train(out, *flags: str) -> int:
    return cli.main(["train", "--config", str(CONFIG), "--out", str(out), "--no-progress", *flags])


def _contents(folder) -> dict:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.parametrize("budget", ["0", "-5", "ten"])
def test_a_budget_that_is_not_positive_is_refused_and_writes_nothing(tmp_path, capsys, budget):
    with pytest.raises(SystemExit) as exit_info:
        _train(tmp_path / "run", "--max-steps", budget)
    assert exit_info.value.code == 2
    got = repr(budget) if budget == "ten" else budget
    assert f"argument --max-steps: must be an int > 0, but got {got}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_an_earlier_run_is_never_overwritten_without_being_asked(tmp_path, capsys):
    assert _train(tmp_path / "run", "--max-steps", "64") == 0
    before = _contents(tmp_path / "run")
    assert set(before) == {"dqn_cartpole.ckpt", "learning_curve.png"}
    assert _train(tmp_path / "run", "--max-steps", "64", "--seed", "1") == 2
    error = capsys.readouterr().err
    assert f"the output folder '{tmp_path / 'run'}' already holds a run (dqn_cartpole.ckpt, learning_curve.png)" \
        in error
    assert "--overwrite" in error
    assert _contents(tmp_path / "run") == before
    # With a compile cache, the refused run has compiled into a pending folder: it leaves nothing there. In a
    # process of its own: the cache, once on, stays on in the process that turned it on.
    cache = tmp_path / "cache"
    refused = subprocess.run([sys.executable, "-m", "mindspore_rl_buffer", "train", "--config", str(CONFIG), "--out",
                              str(tmp_path / "run"), "--no-progress", "--max-steps", "64", "--seed", "1",
                              "--compile-cache", str(cache)], cwd=tmp_path, capture_output=True, text=True,
                             timeout=600)
    assert refused.returncode == 2 and "already holds a run" in refused.stderr, refused.stderr[-2000:]
    assert list(cache.iterdir()) == []
    assert _contents(tmp_path / "run") == before
    assert _train(tmp_path / "run", "--max-steps", "64", "--seed", "1", "--overwrite") == 0
    assert _contents(tmp_path / "run")["dqn_cartpole.ckpt"] != before["dqn_cartpole.ckpt"]


def test_a_compile_cache_folder_that_cannot_be_one_is_a_usage_error_before_anything_runs(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for given, message in (("", "--compile-cache must name a folder, but got ''"),
                           (tmp_path / "a-file", "is a file, not a folder"),
                           (tmp_path / "a-file" / "sub", "cannot be created: ") ,
                           (tmp_path / "loop", "is a symbolic link to nothing")):
        assert _train(tmp_path / "run", "--compile-cache", str(given)) == 2, given
        error = capsys.readouterr().err
        assert error.startswith("error: --compile-cache") and message in error and "Traceback" not in error, error
    assert not (tmp_path / "run").exists()


def test_a_buffer_only_config_names_the_missing_sections(tmp_path, capsys):
    path = tmp_path / "buffer-only.yaml"
    path.write_text("replay_buffer:\n  number: 1\n  type: ReplayBuffer\n  capacity: 1000\n  sample_size: 32\n"
                    "  data_shape: [[4], [1], [1], [4], [1]]\n"
                    "  data_type: [float32, int32, float32, float32, float32]\n")
    assert cli.main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: For 'train', the 'algorithm_config' must have the entries")
    assert "Traceback" not in error
    assert "'learner', 'policy', 'environment', 'trainer' are missing" in error
    assert not (tmp_path / "run").exists()


def test_a_config_with_a_number_for_a_key_names_the_missing_sections_and_the_key(tmp_path, capsys):
    path = tmp_path / "number-key.yaml"
    path.write_text("1: oops\nreplay_buffer:\n  type: ReplayBuffer\n  capacity: 100\n")
    assert cli.main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert error == ("error: For 'train', the 'algorithm_config' must have the entries ['replay_buffer', 'learner', "
                     "'policy', 'environment', 'trainer'], but 'learner', 'policy', 'environment', 'trainer' are "
                     "missing (got [1, 'replay_buffer']). It has the unknown entry 1.\n")
    assert not (tmp_path / "run").exists()


def test_a_python_config_is_run_once(tmp_path, capsys):
    path = tmp_path / "prints.py"
    path.write_text('print("config run")\nalgorithm_config = {"environment": {"name": "CartPole-v1"}}\n')
    assert cli.main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2  # at the config check
    assert capsys.readouterr().out == "config run\n"


def test_the_yaml_layout_copied_from_the_python_file_gets_the_fix(tmp_path, capsys):
    path = tmp_path / "nested.yaml"
    path.write_text("algorithm_config:\n  replay_buffer:\n    number: 1\n")
    assert cli.main(["train", "--config", str(path)]) == 2
    assert "remove the 'algorithm_config:' line and un-indent what was under it" in capsys.readouterr().err


README = (ROOT / "README.md").read_text(encoding="utf-8")
# The line train prints after a run, as the README's Quick start quotes it.
SUMMARY = (r"\d+ environment steps, \d+ learn steps in [\d.]+ s of wall time, compilation and evaluations included "
           r"\(\d+ environment steps/s over the whole run, (fused|host) loop\)")


def test_the_loop_flag(tmp_path, capsys):
    assert _train(tmp_path / "host", "--max-steps", "64", "--loop", "host") == 0
    summary = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(SUMMARY.replace("(fused|host)", "host"), summary), summary
    assert re.fullmatch(SUMMARY, re.search(r"```text\n(\d+ environment steps.*)\n```", README).group(1))
    assert _train(tmp_path / "numpy", "--max-steps", "64", "--loop", "fused", "--buffer", "numpy") == 2
    assert "the 'fused' loop needs the device buffer" in capsys.readouterr().err


@pytest.mark.slow
def test_evaluate_plays_greedy_episodes_of_a_trained_checkpoint(tmp_path, capsys):
    assert _train(tmp_path / "run", "--max-steps", "64") == 0
    capsys.readouterr()
    checkpoint = tmp_path / "run" / "dqn_cartpole.ckpt"
    assert cli.main(["evaluate", "--checkpoint", str(checkpoint), "--episodes", "5",
                     "--frames", str(tmp_path / "frames.png")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("5 greedy episodes: returns from ")
    mean = float(lines[-1].removeprefix("mean return: "))
    assert 1 <= mean <= 500
    assert (tmp_path / "frames.png").stat().st_size > 1000


def test_evaluate_of_one_episode_says_one_episode(tmp_path, capsys):
    checkpoint = tmp_path / "q.ckpt"
    save_q_network(QNetwork(4, 2, (16, 8)), checkpoint)
    assert cli.main(["evaluate", "--checkpoint", str(checkpoint), "--episodes", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"1 greedy episode: return \d+", lines[0]), lines[0]
    assert lines[-1].startswith("mean return: ")


def test_evaluate_refuses_what_is_not_a_trained_q_network(tmp_path, capsys):
    from mindspore import nn

    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "missing.ckpt")]) == 2
    assert "not found" in capsys.readouterr().err
    other = tmp_path / "other.ckpt"
    ms.save_checkpoint(nn.Dense(3, 2), str(other))
    assert cli.main(["evaluate", "--checkpoint", str(other)]) == 2
    assert f"the checkpoint '{other}' must hold a Q-network's weights ('layers.<i>.weight' and '.bias'), but it " \
           "holds 'weight' (2, 3), 'bias' (2,)." in capsys.readouterr().err
    many = tmp_path / "many.ckpt"
    ms.save_checkpoint([{"name": f"p{i}", "data": ms.Tensor(np.zeros(i + 1, np.float32))} for i in range(10)],
                       str(many))
    assert cli.main(["evaluate", "--checkpoint", str(many)]) == 2
    assert "but it holds 'p0' (1,), 'p1' (2,), " in (error := capsys.readouterr().err)
    assert "'p7' (8,) and 2 more." in error and "'p8'" not in error
    noted = tmp_path / "noted.ckpt"  # a text entry (append_dict) ended in an AttributeError traceback
    ms.save_checkpoint(nn.Dense(3, 2), str(noted), append_dict={"note": "not a Q-network", "epoch": 3})
    assert cli.main(["evaluate", "--checkpoint", str(noted)]) == 2
    assert "must hold a Q-network's weights ('layers.<i>.weight' and '.bias'), but it holds " in \
        (error := capsys.readouterr().err) and "'note'" not in error


@pytest.mark.parametrize("name", ["README.md", "learning_curve.png", "q", "q.pt"])
def test_evaluate_refuses_a_file_that_is_no_mindspore_checkpoint_by_its_name(tmp_path, capsys, monkeypatch, name):
    path = tmp_path / name
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["evaluate", "--checkpoint", str(path), "--episodes", "2"]) == 2
    error = capsys.readouterr().err
    got = f"a '{path.suffix}' file" if path.suffix else "a file without a suffix"
    assert error == (f"error: For 'evaluate', the checkpoint '{path}' must be a MindSpore checkpoint ending in .ckpt "
                     f"(as train writes dqn_cartpole.ckpt) or .safetensors, but got {got}.\n")


@pytest.mark.parametrize(("written", "given"), [("text", "x.ckpt"), ("png", "x.ckpt"), ("text", "x.safetensors"),
                                                ("ckpt", "x.safetensors"), ("safetensors", "x.ckpt")])
def test_evaluate_refuses_a_checkpoint_mindspore_cannot_read_naming_it(tmp_path, capsys, written, given):
    path = tmp_path / given
    if written in ("ckpt", "safetensors"):  # a checkpoint renamed to the other format's suffix
        save_q_network(QNetwork(4, 2, (8,)), tmp_path / "q.ckpt")
        ms.save_checkpoint(list(_saved_entries(tmp_path / "q.ckpt")), str(tmp_path / "q.safetensors"),
                           format="safetensors")
        path.write_bytes((tmp_path / f"q.{written}").read_bytes())
    else:
        path.write_bytes(b"# a README\n" if written == "text" else b"\x89PNG\r\n\x1a\n" + bytes(100))
    assert cli.main(["evaluate", "--checkpoint", str(path), "--episodes", "2"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: For 'evaluate', the checkpoint '{path}' must be a MindSpore {path.suffix} file "
                            "(train writes dqn_cartpole.ckpt), but ")
    assert "must same with" not in error and "Traceback" not in error


def _saved_entries(path):
    """The entries of a checkpoint, to write them again in another format."""
    return ({"name": name, "data": parameter} for name, parameter in ms.load_checkpoint(str(path)).items())


@pytest.mark.slow
def test_evaluate_plays_a_safetensors_q_network_as_its_ckpt(tmp_path, capsys):
    save_q_network(QNetwork(4, 2, (16, 8)), tmp_path / "q.ckpt")
    ms.save_checkpoint(list(_saved_entries(tmp_path / "q.ckpt")), str(tmp_path / "q.safetensors"),
                       format="safetensors")
    outputs = []
    for name in ("q.ckpt", "q.safetensors"):
        assert cli.main(["evaluate", "--checkpoint", str(tmp_path / name), "--episodes", "3"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0].startswith("3 greedy episodes: returns from ")


def test_evaluate_of_a_path_that_is_not_a_regular_file_does_not_say_not_found(capsys, monkeypatch):
    error = _refused_before_training(capsys, monkeypatch, ["evaluate", "--checkpoint", "/dev/null"])
    assert error == ("error: --checkpoint '/dev/null' must be a regular file (train writes "
                     "runs/dqn/dqn_cartpole.ckpt), but it is a special file (a device or a pipe)\n")


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_an_empty_a_special_or_a_dangling_input_path_is_named_for_what_it_is(tmp_path, capsys, monkeypatch, command):
    flag = "--config" if command == "train" else "--checkpoint"
    refused = {"": f"error: {flag} must name a file, but got ''\n",
               "/dev/null": f"error: {flag} '/dev/null' must be a regular file",
               str(tmp_path / "loop"): f"error: {flag} '{tmp_path / 'loop'}' is a symbolic link to nothing (a "
                                       f"missing target or a loop)\n"}
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for path, message in refused.items():
        extra = ["--out", str(tmp_path / "run")] if command == "train" else []
        error = _refused_before_training(capsys, monkeypatch, [command, flag, path, *extra])
        assert error.startswith(message) and "not found" not in error and "folder" not in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["loop"]


def test_evaluate_of_a_checkpoint_it_may_not_read_is_a_read_failure_not_a_bad_file(tmp_path, capsys, monkeypatch):
    # A file without read permission was refused as a usage error (exit 2), "corrupt or truncated?".
    checkpoint = tmp_path / "q.ckpt"
    save_q_network(QNetwork(4, 2, (8,)), checkpoint)
    refuse_to_open(monkeypatch, checkpoint)
    assert cli.main(["evaluate", "--checkpoint", str(checkpoint), "--episodes", "1"]) == 1
    error = capsys.readouterr().err
    assert error == (f"error: could not read --checkpoint: [Errno 13] For 'evaluate', the checkpoint could not be "
                     f"read (PermissionError: Permission denied): '{checkpoint}'\n")


def test_a_saved_q_network_loads_with_its_layer_sizes(tmp_path):
    from mindspore_rl_buffer.apps.dqn.networks import load_q_network

    q_net = QNetwork(4, 2, (16, 8))
    save_q_network(q_net, tmp_path / "q.ckpt")
    loaded = load_q_network(tmp_path / "q.ckpt")
    assert [p.shape for p in loaded.get_parameters()] == [(16, 4), (16,), (8, 16), (8,), (2, 8), (2,)]
    for a, b in zip(q_net.get_parameters(), loaded.get_parameters()):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def _usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    return error


@pytest.mark.parametrize("digits", [25, 400, 5000])
def test_a_budget_beyond_a_billion_steps_is_refused_and_quoted_short(tmp_path, capsys, digits):
    budget = "9" * digits
    error = _usage_error(capsys, ["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"),
                                  "--no-progress", "--max-steps", budget])
    assert "argument --max-steps: must be" in error
    assert "99999999999999999999..." in error and budget not in error
    assert len(error) < 1000
    assert not (tmp_path / "run").exists()
    error = _usage_error(capsys, ["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"),
                                  "--no-progress", "--max-steps", str(10**9 + 1)])
    assert "argument --max-steps: must be at most 1000000000 (environment steps), but got 1000000001" in error
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("seed", ["-1", str(2**31), str(2**32), str(10**20), "x"])
def test_a_seed_outside_what_the_generators_take_is_refused(tmp_path, capsys, seed):
    error = _usage_error(capsys, ["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"),
                                  "--no-progress", "--max-steps", "64", "--seed", seed])
    assert "argument --seed: must be an int in [0, 2**31)" in error
    assert not (tmp_path / "run").exists()
    error = _usage_error(capsys, ["evaluate", "--checkpoint", str(tmp_path / "q.ckpt"), "--seed", seed])
    assert "argument --seed: must be an int in [0, 2**31)" in error


@pytest.mark.parametrize("episodes", [str(10**5 + 1), str(10**8), "9" * 5000])
def test_more_episodes_than_fit_in_memory_are_refused(tmp_path, capsys, episodes):
    error = _usage_error(capsys, ["evaluate", "--checkpoint", str(tmp_path / "q.ckpt"), "--episodes", episodes])
    assert "argument --episodes: must be" in error
    assert len(error) < 1000


def _refused_before_training(capsys, monkeypatch, argv) -> str:
    from mindspore_rl_buffer.apps.dqn import play, trainer

    def must_not_run(*args, **kwargs):
        raise AssertionError("trained or played before the flags were checked")

    monkeypatch.setattr(trainer, "train", must_not_run)
    monkeypatch.setattr(play, "evaluate_checkpoint", must_not_run)
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "Traceback" not in error
    return error


def test_an_output_folder_that_cannot_be_written_is_refused_before_training(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("keep")
    error = _refused_before_training(capsys, monkeypatch, ["train", "--out", ""])
    assert "--out must name a folder, but got ''" in error
    error = _refused_before_training(capsys, monkeypatch, ["train", "--out", str(afile)])
    assert f"--out '{afile}' is a file, not a folder" in error
    error = _refused_before_training(capsys, monkeypatch, ["train", "--out", str(afile / "sub" / "run")])
    assert f"--out '{afile / 'sub' / 'run'}' cannot be created: '{afile}' is a file" in error
    assert afile.read_text() == "keep"
    monkeypatch.setattr(cli.os, "access", lambda path, mode: False)  # a read-only folder, even as root
    error = _refused_before_training(capsys, monkeypatch, ["train", "--out", str(tmp_path / "new" / "run")])
    assert f"--out '{tmp_path / 'new' / 'run'}' cannot be created: '{tmp_path}' is not writable" in error
    error = _refused_before_training(capsys, monkeypatch, ["train", "--out", str(tmp_path)])
    assert f"--out '{tmp_path}' is not writable" in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("replace", "no", "'replace' must be a bool, but got str"),
    ("ordered", "yes", "'ordered' must be a bool, but got str"),
    ("seed", -1, "'seed' must be an int >= 0, but got -1"),
    ("seed", 1.5, "'seed' must be an int, but got float"),
])
def test_a_buffer_option_of_the_wrong_kind_is_refused_before_anything_is_built(tmp_path, capsys, monkeypatch,
                                                                               key, value, message):
    config = json.loads(json.dumps(load_config(ROOT / "configs" / "dqn.yaml")))
    config["replay_buffer"][key] = value
    (tmp_path / "bad.json").write_text(json.dumps(config))
    error = _refused_before_training(capsys, monkeypatch, ["train", "--config", str(tmp_path / "bad.json"), "--out",
                                                            str(tmp_path / "run")])
    assert error == f"error: For 'create_buffer', {message}.\n"


def test_an_out_that_is_a_symbolic_link_to_nothing_is_refused_before_training(tmp_path, capsys, monkeypatch):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for out, problem in ((tmp_path / "dangling", f"--out '{tmp_path / 'dangling'}' is"),
                         (tmp_path / "loop", f"--out '{tmp_path / 'loop'}' is"),
                         (tmp_path / "loop" / "sub", f"--out '{tmp_path / 'loop' / 'sub'}' cannot be created: "
                                                     f"'{tmp_path / 'loop'}' is")):
        error = _refused_before_training(capsys, monkeypatch, ["train", "--out", str(out)])
        assert error == f"error: {problem} a symbolic link to nothing (a missing target or a loop)\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dangling", "loop"]


def test_a_dangling_link_named_like_a_shipped_config_is_refused_not_replaced(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "dqn.py").symlink_to(tmp_path / "missing.py")
    error = _refused_before_training(capsys, monkeypatch, ["train", "--config", "configs/dqn.py", "--out", "run"])
    assert error == "error: --config 'configs/dqn.py' is a symbolic link to nothing (a missing target or a loop)\n"


def test_frames_with_a_trailing_slash_and_a_dangling_earlier_checkpoint_are_caught_up_front(tmp_path, capsys,
                                                                                           monkeypatch):
    checkpoint = tmp_path / "q.ckpt"
    save_q_network(QNetwork(4, 2, (16, 8)), checkpoint)
    error = _refused_before_training(capsys, monkeypatch, ["evaluate", "--checkpoint", str(checkpoint), "--frames",
                                                            f"{tmp_path / 'strip.png'}/"])
    assert f"--frames '{tmp_path / 'strip.png'}/' names a folder" in error
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "dqn_cartpole.ckpt").symlink_to(tmp_path / "gone.ckpt")  # an earlier run's, dangling
    monkeypatch.undo()  # the flags pass; the folder check comes before any training
    assert _train(tmp_path / "run", "--max-steps", "8") == 2
    assert "already holds a run (dqn_cartpole.ckpt)" in capsys.readouterr().err


def test_ctrl_c_before_the_graphs_compile_ends_the_command_quietly(tmp_path, capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_train", interrupted)
    assert cli.main(["train", "--out", str(tmp_path / "run")]) == 130
    assert capsys.readouterr() == ("", "")


def test_a_folder_given_as_config_or_checkpoint_is_named_a_folder(tmp_path, capsys, monkeypatch):
    error = _refused_before_training(capsys, monkeypatch, ["train", "--config", str(tmp_path), "--out",
                                                            str(tmp_path / "run")])
    assert f"--config '{tmp_path}' is a folder, not a file" in error and "not found" not in error
    error = _refused_before_training(capsys, monkeypatch, ["evaluate", "--checkpoint", str(tmp_path)])
    assert f"--checkpoint '{tmp_path}' is a folder, not a file" in error and "not found" not in error
    assert list(tmp_path.iterdir()) == []


def test_a_frames_path_that_cannot_be_written_is_refused_before_playing(tmp_path, capsys, monkeypatch):
    checkpoint = tmp_path / "q.ckpt"
    save_q_network(QNetwork(4, 2, (16, 8)), checkpoint)
    evaluate = ["evaluate", "--checkpoint", str(checkpoint), "--episodes", "2", "--frames"]
    error = _refused_before_training(capsys, monkeypatch, [*evaluate, ""])
    assert "--frames must name a file" in error
    error = _refused_before_training(capsys, monkeypatch, [*evaluate, str(tmp_path)])
    assert f"--frames '{tmp_path}' names a folder" in error
    error = _refused_before_training(capsys, monkeypatch, [*evaluate, str(tmp_path / "nodir" / "f.png")])
    assert f"--frames '{tmp_path / 'nodir' / 'f.png'}' cannot be written: folder '{tmp_path / 'nodir'}' does " \
           "not exist" in error
    for under_a_file in (checkpoint / "f.png", checkpoint / "sub" / "f.png"):
        error = _refused_before_training(capsys, monkeypatch, [*evaluate, str(under_a_file)])
        assert f"--frames '{under_a_file}' cannot be written: '{checkpoint}' is a file, not a folder" in error
        assert "does not exist" not in error
    for not_png in ("f.txt", "f", "f.ckpt"):  # matplotlib would write f.png, or another format, or fail late
        error = _refused_before_training(capsys, monkeypatch, [*evaluate, str(tmp_path / not_png)])
        assert f"--frames must name a .png file, such as frames.png, but got '{tmp_path / not_png}'" in error
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    error = _refused_before_training(capsys, monkeypatch, [*evaluate, str(tmp_path / "loop" / "f.png")])
    assert f"cannot be written: '{tmp_path / 'loop'}' is a symbolic link to nothing" in error
    monkeypatch.setattr(cli.os, "access", lambda path, mode: False)
    error = _refused_before_training(capsys, monkeypatch, [*evaluate, str(tmp_path / "f.png")])
    assert f"--frames '{tmp_path / 'f.png'}' cannot be written: it or its folder is not writable" in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["loop", "q.ckpt"]


def test_evaluate_never_overwrites_an_existing_file_with_frames_unless_asked(tmp_path, capsys, monkeypatch):
    checkpoint, curve = tmp_path / "q.ckpt", tmp_path / "learning_curve.png"
    save_q_network(QNetwork(4, 2, (16, 8)), checkpoint)
    curve.write_bytes(b"a training run's learning curve")
    evaluate = ["evaluate", "--checkpoint", str(checkpoint), "--episodes", "2", "--frames", str(curve)]
    error = _refused_before_training(capsys, monkeypatch, evaluate)
    assert f"--frames '{curve}' exists; name a new file, or pass --overwrite to replace it" in error
    assert curve.read_bytes() == b"a training run's learning curve"
    monkeypatch.undo()  # plays for real now
    assert cli.main([*evaluate, "--overwrite"]) == 0
    assert curve.read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_a_failed_write_of_the_outputs_is_an_error_naming_the_path(tmp_path, capsys, monkeypatch):
    from mindspore_rl_buffer.apps.dqn import play, trainer

    def full_disk(_, path, *args, **kwargs):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(trainer, "save_q_network", full_disk)
    assert _train(tmp_path / "run", "--max-steps", "64") == 1
    error = capsys.readouterr().err
    assert error.startswith(f"error: could not write the run to --out '{tmp_path / 'run'}'")
    assert "No space left on device" in error and str(tmp_path / "run" / "dqn_cartpole.") in error
    assert "Traceback" not in error
    checkpoint = tmp_path / "q.ckpt"
    save_q_network(QNetwork(4, 2, (16, 8)), checkpoint)
    monkeypatch.setattr(play, "draw_frames", lambda states, path: full_disk(None, path))
    assert cli.main(["evaluate", "--checkpoint", str(checkpoint), "--episodes", "2",
                     "--frames", str(tmp_path / "f.png")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: could not read --checkpoint or write --frames")
    assert str(tmp_path / "f.png") in error and "Traceback" not in error


def _dense_checkpoint(path, *shapes: tuple[int, int]) -> None:
    """A checkpoint of Dense layers ``layers.0``, ``layers.2``, ... with weights of ``shapes`` (out, in)."""
    entries = []
    for i, (out, inputs) in enumerate(shapes):
        entries += [{"name": f"layers.{2 * i}.weight", "data": ms.Tensor(np.zeros((out, inputs), np.float32))},
                    {"name": f"layers.{2 * i}.bias", "data": ms.Tensor(np.zeros(out, np.float32))}]
    ms.save_checkpoint(entries, str(path))


@pytest.mark.parametrize(("shapes", "message"), [
    (((16, 6), (2, 16)), "first layer takes 6 inputs and its last gives 2 outputs"),
    (((16, 4), (1, 16)), "first layer takes 4 inputs and its last gives 1 outputs"),
    (((16, 4), (2, 8)), "whose sizes chain")], ids=["six_inputs", "one_action", "unchained"])
def test_evaluate_refuses_a_q_network_that_is_not_cartpoles(tmp_path, capsys, monkeypatch, shapes, message):
    monkeypatch.chdir(tmp_path)  # a graph compile error would leave analyze_fail.ir here
    checkpoint = tmp_path / "q.ckpt"
    _dense_checkpoint(checkpoint, *shapes)
    assert cli.main(["evaluate", "--checkpoint", str(checkpoint), "--episodes", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: For 'evaluate', the checkpoint '{checkpoint}' must hold ")
    assert message in err and f"weights {[tuple(shape) for shape in shapes]}" in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["q.ckpt"]


def test_evaluate_refuses_an_empty_checkpoint_naming_it(tmp_path, capsys):
    checkpoint = tmp_path / "empty.ckpt"
    checkpoint.touch()
    assert cli.main(["evaluate", "--checkpoint", str(checkpoint)]) == 2
    err = capsys.readouterr().err
    assert f"error: For 'evaluate', the checkpoint '{checkpoint}' must hold a Q-network's weights, but the file is " \
           "empty." in err
    assert "prefix" not in err


SHIPPED_CONFIGS = sorted(path.name for path in (ROOT / "configs").iterdir() if path.suffix in (".py", ".yaml")
                         and not path.name.startswith("_"))


class TrainCalledError(Exception):
    """Raised in place of training, with the config train was given."""


def _config_given_to_train(monkeypatch, argv: list[str]) -> dict:
    """Run the command line up to training; return the config it would train from."""
    from mindspore_rl_buffer.apps.atari import trainer as atari_trainer
    from mindspore_rl_buffer.apps.dqn import trainer

    def record(config, *args, **kwargs):
        raise TrainCalledError(config)

    monkeypatch.setattr(trainer, "train", record)
    monkeypatch.setattr(atari_trainer, "train", record)  # an Atari config goes to the Atari trainer
    with pytest.raises(TrainCalledError) as trained:
        cli.main(argv)
    return trained.value.args[0]


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_every_shipped_config_is_found_outside_the_repository(tmp_path, monkeypatch, name):
    from mindspore_rl_buffer import load_config

    monkeypatch.chdir(tmp_path)
    config = _config_given_to_train(monkeypatch, ["train", "--config", f"configs/{name}", "--out",
                                                  str(tmp_path / "run"), "--no-progress"])
    assert config == load_config(ROOT / "configs" / name)


def test_a_config_that_is_not_shipped_is_not_found_and_the_shipped_ones_are_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = _refused_before_training(capsys, monkeypatch, ["train", "--config", "configs/dqn_other.yaml"])
    assert "config file 'configs/dqn_other.yaml' not found" in error
    assert all(f"configs/{name}" in error for name in SHIPPED_CONFIGS)


@pytest.mark.parametrize("name", ["dqn_cartpole.ckpt", "learning_curve.png"])
@pytest.mark.parametrize("overwrite", [False, True], ids=["keep", "overwrite"])
def test_a_folder_by_the_name_of_an_output_file_is_refused_before_training(tmp_path, capsys, monkeypatch, name,
                                                                           overwrite):
    from mindspore_rl_buffer.apps.dqn import trainer

    def must_not_run(*args, **kwargs):
        raise AssertionError("trained before the output folder was checked")

    monkeypatch.setattr(trainer, "chunks", must_not_run)
    (tmp_path / "run" / name).mkdir(parents=True)
    assert _train(tmp_path / "run", "--max-steps", "64", *(["--overwrite"] if overwrite else [])) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: For 'train', the output folder '{tmp_path / 'run'}' must leave the name "
                            f"'{name}' to the run's file, but '{tmp_path / 'run' / name}' is a folder")
    assert "Traceback" not in error
    assert [path.name for path in (tmp_path / "run").iterdir()] == [name]


@pytest.mark.parametrize(("budget", "rounded"), [("1", 8), ("13", 16), ("999", 1000)])
def test_a_budget_that_is_not_a_multiple_of_the_environments_is_rounded_up_with_a_note(tmp_path, capsys,
                                                                                    monkeypatch, budget, rounded):
    argv = ["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"), "--no-progress"]
    _config_given_to_train(monkeypatch, [*argv, "--max-steps", budget])
    assert capsys.readouterr().err == (f"note: --max-steps {budget} is rounded up to {rounded} environment steps, a "
                                       f"multiple of the 8 environments (environment.num_envs): every collect steps "
                                       f"all of them\n")
    _config_given_to_train(monkeypatch, [*argv, "--max-steps", str(rounded)])
    _config_given_to_train(monkeypatch, argv)  # the shipped 150,000 steps
    assert capsys.readouterr().err == ""


def test_a_config_budget_that_is_not_a_multiple_is_named_in_the_note(tmp_path, capsys, monkeypatch):
    path = tmp_path / "odd.yaml"
    path.write_text((ROOT / "configs" / "dqn.yaml").read_text().replace("max_steps: 150000", "max_steps: 150001"))
    _config_given_to_train(monkeypatch, ["train", "--config", str(path), "--out", str(tmp_path / "run"),
                                         "--no-progress"])
    assert "note: the config's trainer.max_steps 150001 is rounded up to 150008 environment steps" \
        in capsys.readouterr().err


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.slow
def test_a_run_written_meanwhile_into_the_same_folder_is_kept_and_this_run_keeps_its_own_names(
        tmp_path, capsys, monkeypatch, overwrite):
    from mindspore_rl_buffer.apps.dqn import trainer

    if overwrite:  # an earlier run's files, which --overwrite may replace, but not the files written since
        (tmp_path / "run").mkdir()
        for name in (trainer.CHECKPOINT, trainer.CURVE):
            (tmp_path / "run" / name).write_bytes(b"the earlier run's " + name.encode())

    save = trainer.save_q_network

    def other_run_finished_meanwhile(q_net, path):  # another train into the same folder, done while this one ran
        for name in (trainer.CHECKPOINT, trainer.CURVE):
            (tmp_path / "run" / name).write_bytes(b"the other run's " + name.encode())
        save(q_net, path)

    monkeypatch.setattr(trainer, "save_q_network", other_run_finished_meanwhile)
    assert _train(tmp_path / "run", "--max-steps", "64", *(["--overwrite"] if overwrite else [])) == 0
    captured = capsys.readouterr()
    assert "note: another run wrote to --out" in captured.err
    files = _contents(tmp_path / "run")
    assert files["dqn_cartpole.ckpt"] == b"the other run's dqn_cartpole.ckpt"
    assert files["learning_curve.png"] == b"the other run's learning_curve.png"
    own = sorted(set(files) - {"dqn_cartpole.ckpt", "learning_curve.png"})
    assert [name.split(".")[0] for name in own] == ["dqn_cartpole", "learning_curve"]
    assert f"checkpoint: {tmp_path / 'run' / own[0]}" in captured.out
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "run" / own[0]), "--episodes", "2"]) == 0


def test_publish_creates_the_final_name_exclusively_and_replaces_only_the_file_it_may(tmp_path):
    import os

    from mindspore_rl_buffer.apps.dqn.trainer import _identity, publish

    final = tmp_path / "final"
    (tmp_path / "mine.1").write_bytes(b"mine")
    assert publish(tmp_path / "mine.1", final) == final
    assert final.read_bytes() == b"mine" and not (tmp_path / "mine.1").exists()
    (tmp_path / "mine.2").write_bytes(b"second")
    assert publish(tmp_path / "mine.2", final) == tmp_path / "mine.2"
    assert final.read_bytes() == b"mine" and (tmp_path / "mine.2").read_bytes() == b"second"
    earlier = _identity(final)
    assert publish(tmp_path / "mine.2", final, earlier) == final
    assert final.read_bytes() == b"second" and not (tmp_path / "mine.2").exists()
    (tmp_path / "other").write_bytes(b"second")  # another run's file put in place since: same size and bytes
    os.replace(tmp_path / "other", final)
    (tmp_path / "mine.3").write_bytes(b"third")
    assert publish(tmp_path / "mine.3", final, earlier) == tmp_path / "mine.3"
    assert final.read_bytes() == b"second" and (tmp_path / "mine.3").read_bytes() == b"third"


def test_running_out_of_memory_building_the_run_is_an_error_naming_the_sizes(tmp_path, capsys, monkeypatch):
    from mindspore_rl_buffer.apps.dqn import trainer

    def too_large(*args, **kwargs):
        raise MemoryError("Unable to allocate 16.0 GiB for an array with shape (1073741824, 4)")

    monkeypatch.setattr(trainer, "train", too_large)
    assert _train(tmp_path / "run") == 2
    error = capsys.readouterr().err
    assert error.startswith("error: out of memory building the run (Unable to allocate 16.0 GiB")
    assert "'replay_buffer.capacity' (100000)" in error and "'policy.hidden_sizes' ((128, 128))" in error
    assert "Traceback" not in error


def test_a_q_network_whose_layers_are_numbered_one_after_another_loads_in_their_order(tmp_path):
    from mindspore_rl_buffer.apps.dqn.networks import load_q_network

    rng = np.random.default_rng(0)
    values = [rng.normal(size=shape).astype(np.float32) for shape in ((8, 4), (8,), (2, 8), (2,))]
    names = ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]
    ms.save_checkpoint([{"name": n, "data": ms.Tensor(v)} for n, v in zip(names, values)], str(tmp_path / "q.ckpt"))
    loaded = load_q_network(tmp_path / "q.ckpt")
    for parameter, value in zip(loaded.get_parameters(), values):
        np.testing.assert_array_equal(parameter.asnumpy(), value)


def test_a_checkpoint_of_several_networks_is_refused_naming_two_of_them(tmp_path, capsys):
    q_net = QNetwork(4, 2, (8,))
    entries = [{"name": f"{prefix}.{p.name}", "data": p} for prefix in ("policy.q_net", "optimizer.moment2")
               for p in q_net.get_parameters()]
    ms.save_checkpoint(entries, str(tmp_path / "cell.ckpt"))
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "cell.ckpt")]) == 2
    error = capsys.readouterr().err
    assert "must hold one Q-network, but 'policy.q_net.layers.0.weight' and 'optimizer.moment2.layers.0.weight' " \
           "are both its 'layers.0.weight'" in error


def test_a_checkpoint_with_a_nan_weight_is_refused_naming_it(tmp_path, capsys):
    q_net = QNetwork(4, 2, (8,))
    weight = list(q_net.get_parameters())[2]
    value = weight.asnumpy()
    value[1, 3], value[0, 0] = np.nan, np.inf
    weight.set_data(ms.Tensor(value))
    save_q_network(q_net, tmp_path / "q.ckpt")
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "q.ckpt")]) == 2
    assert (f"the checkpoint '{tmp_path / 'q.ckpt'}' must hold finite weights, but its 'layers.2.weight' holds 1 NaN "
            f"and 1 infinite values") in capsys.readouterr().err



def test_a_checkpoint_of_integer_weights_is_refused_naming_one(tmp_path, capsys):
    q_net = QNetwork(4, 2, (8,))
    entries = [{"name": p.name, "data": ms.Tensor(np.ones(p.shape, np.uint8))} for p in q_net.get_parameters()]
    ms.save_checkpoint(entries, str(tmp_path / "q.ckpt"))
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "q.ckpt")]) == 2
    assert (f"the checkpoint '{tmp_path / 'q.ckpt'}' must hold floating-point weights, but its 'layers.0.weight' is "
            f"uint8") in capsys.readouterr().err


def _nstep_json() -> dict:
    from mindspore_rl_buffer.configs.dqn_nstep import algorithm_config

    config = json.loads(json.dumps(load_config(ROOT / "configs" / "dqn.yaml")))
    entry = dict(algorithm_config["replay_buffer"], type="TransitionReplayBuffer",
                 data_type=["float32", "int32", "float32", "uint8", "uint8"])
    entry["data_shape"] = [list(shape) for shape in entry["data_shape"]]
    config["replay_buffer"] = entry
    return config


@pytest.mark.parametrize(("nstep", "key", "value", "message"), [
    (True, "capacity", 1004, "For 'TransitionReplayBuffer', 'capacity' (1004) must be a multiple of 'num_envs' (8)"),
    (False, "names", ["head", "action", "reward", "next_state", "terminated"], "'head'"),
    (False, "names", ["training", "action", "reward", "next_state", "terminated"], "'training'"),
    (True, "names", ["ranks", "action", "reward", "terminated", "truncated"], "'ranks'"),
])
def test_an_entry_the_buffer_s_constructor_refuses_is_a_usage_error_before_anything_is_built(
        tmp_path, capsys, monkeypatch, nstep, key, value, message):
    from mindspore_rl_buffer.apps.dqn import agent

    def must_not_build(*args, **kwargs):
        raise AssertionError("a network was built before the buffer entry was checked")

    monkeypatch.setattr(agent, "QNetwork", must_not_build)
    config = _nstep_json() if nstep else json.loads(json.dumps(load_config(ROOT / "configs" / "dqn.yaml")))
    config["replay_buffer"][key] = value
    (tmp_path / "bad.json").write_text(json.dumps(config))
    assert cli.main(["train", "--config", str(tmp_path / "bad.json"), "--out", str(tmp_path / "run"),
                     "--no-progress", "--max-steps", "64"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: For 'train', the replay buffer cannot be built from its entry: ")
    assert message in error and "Traceback" not in error
    assert not (tmp_path / "run").exists()
