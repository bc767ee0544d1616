"""The fast tier catches every hand-written mutant of tests/mutants.py (a few minutes: slow tier)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.whole_machine
def test_the_fast_tier_catches_every_mutant():
    done = subprocess.run([sys.executable, "-m", "tests.mutants"], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600)
    assert done.returncode == 0, f"python -m tests.mutants exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
