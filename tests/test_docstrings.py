"""The Examples in the docstrings run, and print what they say."""
from __future__ import annotations

import doctest
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Every module with an example in a docstring (ops/ is installed as mindspore_rl_buffer.ops).
MODULES = sorted(
    ".".join(["mindspore_rl_buffer", *path.relative_to(ROOT / "mindspore_rl_buffer").with_suffix("").parts])
    .replace(".__init__", "")
    for path in (ROOT / "mindspore_rl_buffer").rglob("*.py") if ">>> " in path.read_text()
) + sorted(
    ".".join(["mindspore_rl_buffer.ops", path.stem]).replace(".__init__", "")
    for path in (ROOT / "ops").glob("*.py") if ">>> " in path.read_text()
) + sorted(f"benchmarks.{path.stem}" for path in (ROOT / "benchmarks").glob("*.py") if ">>> " in path.read_text())


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
