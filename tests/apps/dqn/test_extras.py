"""matplotlib and tqdm are the ``dqn`` extra: a run that needs a missing one says how to install it,
before any training, and a run that needs neither works without them."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from mindspore_rl_buffer.apps.dqn import cli, train
from mindspore_rl_buffer.apps.dqn.extras import MissingExtraError
from mindspore_rl_buffer.apps.dqn.plotting import plot_learning_curve
from mindspore_rl_buffer.apps.dqn.trainer import TrainResult
from tests.apps.dqn.helpers import CONFIG, small_config

INSTALL = "pip install 'mindspore_rl_buffer[dqn]'"


def _without(monkeypatch, *modules: str) -> None:
    """Make ``import module`` raise ImportError, as if it were not installed."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize(("missing", "needed_by"), [("tqdm", "the progress bar"), ("matplotlib", "the learning curve")])
def test_cli_names_the_missing_extra_before_training(monkeypatch, capsys, tmp_path, missing, needed_by):
    _without(monkeypatch, missing)
    status = cli.main(["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"), "--max-steps", "64"])
    assert status == 2
    error = capsys.readouterr().err
    assert f"For 'train', {needed_by} needs {missing}, which is not installed: {INSTALL}" in error
    assert not (tmp_path / "run").exists(), "nothing may run before the check"


def test_cli_without_tqdm_runs_with_no_progress(monkeypatch, capsys, tmp_path):
    _without(monkeypatch, "tqdm")
    status = cli.main(["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"), "--max-steps", "64",
                       "--no-progress"])
    assert status == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("final evaluation return: ")
    assert (tmp_path / "run" / "learning_curve.png").stat().st_size > 1000


@pytest.mark.slow
def test_train_needs_neither_without_a_bar_or_an_output_folder(monkeypatch):
    _without(monkeypatch, "tqdm", "matplotlib")
    result = train(small_config(max_steps=120), seed=0, progress=False)
    assert result.env_steps == 120 and result.curve_path is None
    assert np.isfinite([loss for _, loss in result.loss_history]).all()


def test_plotting_without_matplotlib_is_a_clear_error(monkeypatch, tmp_path):
    _without(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError, match=r"the learning curve needs matplotlib.*mindspore_rl_buffer\[dqn\]"):
        plot_learning_curve(TrainResult(False, 0.0, 0, 0, 0.0, 0.0), tmp_path / "curve.png")
    assert not (tmp_path / "curve.png").exists()
    assert issubclass(MissingExtraError, ImportError)


def test_evaluate_frames_without_matplotlib_names_evaluate_and_its_frames(monkeypatch, capsys, tmp_path):
    from mindspore_rl_buffer.apps.dqn.networks import QNetwork, save_q_network

    checkpoint = tmp_path / "q.ckpt"
    save_q_network(QNetwork(4, 2, (8,)), checkpoint)
    _without(monkeypatch, "matplotlib")
    status = cli.main(["evaluate", "--checkpoint", str(checkpoint), "--episodes", "2",
                       "--frames", str(tmp_path / "frames.png")])
    assert status == 2
    error = capsys.readouterr().err
    assert f"For 'evaluate', the strip of frames (--frames) needs matplotlib, which is not installed: {INSTALL}" \
        in error
    assert "'train'" not in error and "learning curve" not in error
    assert not (tmp_path / "frames.png").exists()
