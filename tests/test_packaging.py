"""A regular (non-editable) install ships ops/ as mindspore_rl_buffer.ops."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_installs_ops_inside_the_package(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                    "-w", str(tmp_path)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("mindspore_rl_buffer-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"mindspore_rl_buffer/ops/__init__.py", "mindspore_rl_buffer/ops/ring.py",
            "mindspore_rl_buffer/replay_buffer.py", "mindspore_rl_buffer/configs/dqn.py"} <= names
    assert not any(name.startswith(("ops/", "configs/")) for name in names)
