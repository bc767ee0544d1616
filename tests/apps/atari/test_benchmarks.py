"""The Atari benchmarks' quick modes run end to end and record their figures where told."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ale_py  # noqa: F401 - fails the module when the atari extra is missing
import pytest

from benchmarks.atari_learning import final_score, normalized

ROOT = Path(__file__).resolve().parents[3]


def test_the_final_score_is_the_mean_of_the_last_fifth_or_the_last_game():
    assert final_score([[100, 1.0], [850, 3.0], [990, 5.0]], 1000) == 4.0
    assert final_score([[100, 1.0], [300, 2.0]], 1000) == 2.0
    assert final_score([], 1000) is None
    assert normalized(1.7, "Breakout") == 0.0 and normalized(30.5, "Breakout") == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("name, keys", [
    ("atari_throughput", ["emulator_steps_per_second", "job_steps_per_second", "learn_steps_per_second"]),
    ("atari_memory", ["growth", "frame_payload", "buffer_parameter_bytes"]),
    ("atari_learning", ["runs", "summary"]),
])
def test_the_quick_mode_runs_and_records(tmp_path, name, keys):
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--quick", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / f"{name}.json").read_text())
    assert all(key in results for key in keys) and results["run"]["commit"]
