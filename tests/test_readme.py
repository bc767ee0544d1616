"""Every ```python block of the README runs on its own, as written, and logs no side-effect warning;
every ```yaml block is a config the library loads.

Each block runs in a fresh interpreter in an empty folder that sees the repository's ``configs/``
(the README's commands run from the repository root). ```bash blocks are commands (set-up,
training, tests, msrun) and are not run here.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "README.md").read_text()
PYTHON = re.findall(r"```python\n(.*?)```", TEXT, re.S)
YAML = re.findall(r"```yaml\n(.*?)```", TEXT, re.S)


def test_the_readme_has_examples():
    assert len(PYTHON) >= 8 and YAML


@pytest.mark.parametrize("number", range(len(PYTHON)))
def test_readme_example_runs_on_its_own(tmp_path, number):
    script = tmp_path / f"example_{number}.py"
    script.write_text(PYTHON[number])
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                            timeout=300)
    assert result.returncode == 0, PYTHON[number][:300] + "\n" + result.stderr[-3000:]
    assert "eliminated by mistake" not in result.stderr, result.stderr[-3000:]


@pytest.mark.parametrize("number", range(len(YAML)))
def test_readme_yaml_is_a_config_that_builds_its_buffer(number):
    from mindspore_rl_buffer import create_buffer

    config = yaml.safe_load(YAML[number])
    buffer = create_buffer(config["replay_buffer"])
    assert buffer.capacity > 0
