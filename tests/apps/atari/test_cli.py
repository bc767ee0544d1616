"""``mindspore-rl-buffer train`` with an Atari config: the hand-over, the refused options, a real run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ale_py  # noqa: F401 - fails the module when the atari extra is missing
import pytest

from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.atari import trainer
from mindspore_rl_buffer.apps.dqn import cli

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "dqn_atari.py"


class TrainCalledError(Exception):
    """Raised instead of training: carries the config and options ``train`` was given."""


def _handed_over(monkeypatch, argv: list[str]) -> tuple[dict, dict]:
    def record(config, **kwargs):
        raise TrainCalledError(config, kwargs)

    monkeypatch.setattr(trainer, "train", record)
    with pytest.raises(TrainCalledError) as called:
        cli.main(argv)
    return called.value.args


def test_an_atari_config_is_handed_to_the_atari_trainer_with_its_options(tmp_path, monkeypatch):
    config, options = _handed_over(monkeypatch, ["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"),
                                                 "--max-steps", "300", "--seed", "7", "--no-progress"])
    assert config == load_config(CONFIG)
    assert (options["max_steps"], options["seed"], options["log"]) == (300, 7, None)
    assert trainer.is_atari_config(config) and not trainer.is_atari_config(load_config(ROOT / "configs" / "dqn.py"))


def test_the_boxing_config_is_the_breakout_config_with_its_game():
    boxing, breakout = load_config(ROOT / "configs" / "dqn_atari_boxing.py"), load_config(CONFIG)
    assert boxing["environment"].pop("game") == "Boxing" and breakout["environment"].pop("game") == "Breakout"
    assert boxing == breakout


@pytest.mark.parametrize("flag", [["--buffer", "numpy"], ["--env", "gymnasium"], ["--loop", "host"],
                                  ["--compile-cache", "cache"]])
def test_the_cartpole_options_are_refused_for_an_atari_config(tmp_path, capsys, flag):
    status = cli.main(["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"), *flag])
    assert status == 2
    assert capsys.readouterr().err == (f"error: {flag[0]} is for the CartPole configs; an Atari config runs its own "
                                       f"trainer\n")


def test_an_atari_python_config_is_run_once(tmp_path, monkeypatch, capsys):
    path = tmp_path / "prints.py"
    path.write_text('print("config run")\nfrom mindspore_rl_buffer.configs.dqn_atari import algorithm_config\n')
    _handed_over(monkeypatch, ["train", "--config", str(path), "--out", str(tmp_path / "run"), "--no-progress"])
    assert capsys.readouterr().out == "config run\n"


def _derived_config(path: Path, change: str) -> Path:
    """A config file at ``path``: the shipped Atari config with the statement ``change`` applied to ``config``."""
    path.write_text(f"import copy\nfrom mindspore_rl_buffer.configs.dqn_atari import algorithm_config as base\n"
                    f"config = copy.deepcopy(base)\n{change}\nalgorithm_config = config\n")
    return path


def _must_not_train(config, **kwargs):
    raise AssertionError("the Atari trainer ran before the config was checked")


@pytest.mark.parametrize("change, message", [
    (None, "an Atari config must have the sections ['replay_buffer', 'learner', 'policy', 'environment', "
           "'trainer'], but 'replay_buffer', 'learner', 'policy', 'trainer' are missing"),
    ('del config["trainer"]["update_period"], config["policy"]["epsilon_end"]',
     "an Atari config must set 'policy.epsilon_end', 'trainer.update_period' (see configs/dqn_atari.py)"),
    ('config["trainer"]["update_periods"] = 4',
     "the 'trainer' section of an Atari config takes 'max_steps', 'learning_starts', 'update_period', "
     "'log_interval', 'seed', but got the unknown key 'update_periods'; did you mean update_period?"),
    ('config["learner"] = 1e-4', "the 'learner' section of an Atari config must be a dict, but got float"),
    ('config["replay_buffer"]["capacity"] = 0', "'capacity' must be an int >= 1, but got 0"),
    ('config["replay_buffer"] = {"type": "ReplayBuffer", "capacity": 64, "data_shape": [[84, 84]], '
     '"data_type": ["uint8"]}',
     "an Atari config's replay buffer must be one TransitionReplayBuffer or PrioritizedTransitionReplayBuffer "
     "('number' 1), but got 1 of 'ReplayBuffer'"),
    # Values: each of these crashed the run with a traceback (exit 1), or trained with a setting ignored.
    ('config["learner"]["learning_rate"] = "fast"',
     "the 'learner.learning_rate' of an Atari config must be a finite number > 0, but got 'fast'"),
    ('config["trainer"]["update_period"] = 0',
     "the 'trainer.update_period' of an Atari config must be an int in [1, 2**31), but got 0"),
    ('config["environment"]["repeat_action_probability"] = 1.5',
     "the 'environment.repeat_action_probability' of an Atari config must be a number in [0, 1], but got 1.5"),
    ('config["learner"]["beta_end"] = float("nan")',
     "the 'learner.beta_end' of an Atari config must be a finite number >= 0, but got nan"),
    ('config["environment"]["game"] = "Breakot"',
     "the 'environment.game' of an Atari config must be an ALE game such as 'Breakout', but got 'Breakot'; "
     "did you mean Breakout?"),
    ('config["replay_buffer"]["data_shape"] = [(84, 84), (), (), ()]; '
     'config["replay_buffer"]["data_type"] = config["replay_buffer"]["data_type"][:4]',
     "the replay buffer's 'data_shape' must be [(84, 84), (), (), (), ()] (observation, action, reward, "
     "terminated, truncated), but got [(84, 84), (), (), ()]"),
    ('config["replay_buffer"]["num_envs"] = 2',
     "an Atari config's replay buffer must have 'num_envs' 1 (the trainer steps one emulator), but got 2"),
    ('config["learner"]["gamma"] = 0.9',
     "an Atari config's replay buffer 'gamma' must equal 'learner.gamma' (0.9): the buffer discounts the n-step "
     "returns the learner bootstraps from, but got 0.99"),
    ('config["replay_buffer"]["n_step"] = 0', "'n_step' must be an int >= 1, but got 0"),
    ('config["trainer"]["learning_starts"] = 8',
     "the 'trainer.learning_starts' of an Atari config must be at least stack_size + n_step + 2 = 9 agent steps, "
     "so that the first update finds a valid start in the buffer, but got 8"),
])
def test_a_bad_atari_config_is_a_usage_error_naming_it_before_training(tmp_path, monkeypatch, capsys, change,
                                                                         message):
    path = tmp_path / "bad.py"
    if change is None:  # only the game: what makes a config an Atari config
        path.write_text('algorithm_config = {"environment": {"game": "Breakout"}}\n')
    else:
        _derived_config(path, change)
    monkeypatch.setattr(trainer, "train", _must_not_train)
    assert cli.main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: For ") and error.endswith(f" (in the config file {str(path)!r}).\n"), error
    assert message in error, error
    assert not (tmp_path / "run").exists()


def test_an_out_folder_holding_an_earlier_run_is_refused_without_overwrite(tmp_path, capsys):
    (tmp_path / trainer.CHECKPOINT).write_bytes(b"")
    assert cli.main(["train", "--config", str(CONFIG), "--out", str(tmp_path)]) == 2
    assert "holds an earlier run" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_trains_on_the_real_emulator_and_writes_its_run(tmp_path):
    # The shipped config with updates from step 200 instead of 1,600: the same graphs, a fifth of the steps.
    config = _derived_config(tmp_path / "atari_early.py", 'config["trainer"]["learning_starts"] = 200')
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "mindspore_rl_buffer", "train", "--config", str(config), "--out",
                           str(out), "--max-steps", "400", "--no-progress"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # No deprecated MindSpore primitive in its graphs (the random draws included), no eliminated side effect.
    assert "deprecated" not in done.stderr and "eliminated by mistake" not in done.stderr, done.stderr[-3000:]
    assert "400 agent steps, 51 learn steps" in done.stdout  # one update per 4 steps, steps 200 to 400
    assert (out / trainer.CHECKPOINT).stat().st_size > 1_000_000  # the Q-network's ~3.3M float32 weights
    record = json.loads((out / trainer.RETURNS).read_text())
    assert record["env_steps"] == 400 and record["learn_steps"] == 51
    assert record["returns"], "a Breakout game ends within 400 agent steps"
    assert all(0 < step <= 400 and score >= 0 for step, score in record["returns"])
