"""The README's complete examples (code blocks that start with `import mindspore as ms`) run."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = [block for block in re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
          if block.startswith("import mindspore as ms")]


def test_the_readme_has_complete_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_readme_example_runs(tmp_path, number):
    script = tmp_path / f"example_{number}.py"
    script.write_text("import mindspore as ms\nms.set_context(mode=ms.GRAPH_MODE)\n" + BLOCKS[number])
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
