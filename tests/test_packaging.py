"""A regular (non-editable) install ships ops/ as mindspore_rl_buffer.ops and the DQN app under
mindspore_rl_buffer.apps, whose matplotlib and tqdm are the ``dqn`` extra."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_installs_ops_inside_the_package(tmp_path):
    # Built from a copy of the sources: setuptools reuses a build/ folder, whose files from an
    # earlier layout would otherwise end up in the wheel.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns("build", "dist", ".venv*", "*.egg-info", ".git",
                                                                "__pycache__", "runs", "benchmarks"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source),
                    "-w", str(tmp_path)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("mindspore_rl_buffer-*.whl")
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert {"mindspore_rl_buffer/ops/__init__.py", "mindspore_rl_buffer/ops/ring.py",
            "mindspore_rl_buffer/replay_buffer.py", "mindspore_rl_buffer/configs/dqn.py",
            "mindspore_rl_buffer/configs/dqn.yaml"} <= names
    assert not any(name.startswith(("ops/", "configs/")) for name in names)
    # The DQN main job is an application beside the library core, not inside it.
    assert {"mindspore_rl_buffer/apps/__init__.py", "mindspore_rl_buffer/apps/dqn/__init__.py",
            "mindspore_rl_buffer/apps/dqn/cli.py", "mindspore_rl_buffer/apps/dqn/cartpole.py",
            "mindspore_rl_buffer/apps/dqn/trainer.py", "mindspore_rl_buffer/apps/dqn/plotting.py",
            "mindspore_rl_buffer/__main__.py"} <= names
    assert not {"mindspore_rl_buffer/dqn.py", "mindspore_rl_buffer/cli.py", "mindspore_rl_buffer/cartpole.py"} & names
    (info,) = {name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA")}
    entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert "mindspore-rl-buffer = mindspore_rl_buffer.apps.dqn.cli:main" in entry_points
    requires = [line for line in archive.read(f"{info}/METADATA").decode().splitlines()
                if line.startswith("Requires-Dist:")]
    for package in ("matplotlib", "tqdm"):
        (line,) = [line for line in requires if line.split()[1].startswith(package)]
        assert line.endswith('; extra == "dqn"'), line


@pytest.mark.parametrize("collecting", [True, False])
def test_importing_the_package_leaves_the_garbage_collector_as_it_found_it(collecting):
    # The package pauses the collector while MindSpore imports; a process that had it off keeps it off.
    script = (f"import gc\n{'gc.enable()' if collecting else 'gc.disable()'}\nimport mindspore_rl_buffer\n"
              f"import mindspore_rl_buffer.apps.dqn.cli\nprint(gc.isenabled())\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(collecting)
