"""The install and CI the README describes: the Pythons the Quick start names are those setup.py accepts, and those
MindSpore 2.10 has wheels for; the checkpoints the README's examples write stay out of git; "Development" names
every step of .ci/run."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
# MindSpore 2.10 publishes wheels for these Pythons only; on 3.9 pip finds MindSpore 2.9 at most.
MINDSPORE_PYTHONS = ("3.10", "3.11", "3.12")


def _setup_keywords() -> dict:
    """The literal keyword arguments of setup.py's ``setup(...)`` call."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    call = next(node for node in ast.walk(tree)
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup")
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords
            if keyword.arg in ("python_requires", "classifiers")}


def test_setup_accepts_exactly_the_pythons_mindspore_installs_on():
    keywords = _setup_keywords()
    accepted = SpecifierSet(keywords["python_requires"])
    assert [v for v in ("3.8", "3.9", *MINDSPORE_PYTHONS, "3.13") if v in accepted] == list(MINDSPORE_PYTHONS)
    classified = [c.rsplit(" :: ", 1)[1] for c in keywords["classifiers"]
                  if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert classified == list(MINDSPORE_PYTHONS)


def test_the_quick_start_names_those_pythons():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"Python (3\.\d+)–(3\.\d+)", quick_start) == [(MINDSPORE_PYTHONS[0], MINDSPORE_PYTHONS[-1])]


def test_git_ignores_the_checkpoints_the_readme_writes_and_keeps_the_test_data():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    written = ["buffer.safetensors", "step-1000.safetensors", "runs/dqn/dqn_cartpole.ckpt", "q.ckpt"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=ROOT, capture_output=True,
                             text=True, check=False).stdout.split()
    assert ignored == written
    data = ["tests/data/v9_replay_buffer.safetensors", "tests/data/v9_replay_buffer.ckpt"]
    kept = subprocess.run(["git", "check-ignore", "--no-index", *data], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert kept.stdout == ""


def test_the_readme_names_every_step_of_the_ci_script():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    development = readme.split("\n## Development\n", 1)[1].split("\n## ", 1)[0]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    steps = ["pip check", "ruff check .", "python -m benchmarks --smoke", "python -m benchmarks.gpu_check"]
    assert all(step in script for step in steps)
    assert [step for step in steps if f"`{step}" not in development] == []
