"""The documentation's CLI reference is the command's own ``--help``: the ``cli-reference`` directive
(docs/_ext/cli_reference.py) renders, for each subcommand, exactly what ``mindspore-rl-buffer <command>
--help`` prints at the same terminal width, so the reference in docs/dqn.md cannot drift."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import cli_reference  # noqa: E402

COMMANDS = [None, "train", "evaluate"]


def command_help(command: str | None) -> str:
    """``mindspore-rl-buffer [command] --help`` run in a fresh process at the directive's width."""
    script = pathlib.Path(sys.executable).parent / "mindspore-rl-buffer"
    found = str(script) if script.exists() else shutil.which("mindspore-rl-buffer")
    launcher = [found] if found else [sys.executable, "-m", "mindspore_rl_buffer"]
    argv = ["--help"] if command is None else [command, "--help"]
    env = {**os.environ, "COLUMNS": str(cli_reference.COLUMNS)}
    result = subprocess.run([*launcher, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_subcommand_is_rendered():
    assert "{train,evaluate}" in cli_reference.help_text()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command or "top-level")
def test_the_rendered_help_is_what_the_command_prints(command):
    assert cli_reference.help_text(command) == command_help(command)


def test_the_width_is_fixed():
    assert cli_reference.help_text("train", columns=200) != cli_reference.help_text("train")
    assert cli_reference.help_text("train") == cli_reference.help_text("train")
    assert max(len(line) for line in cli_reference.help_text("train").splitlines()) <= cli_reference.COLUMNS


def test_an_unknown_command_is_an_error():
    with pytest.raises(ValueError, match="mindspore-rl-buffer play --help"):
        cli_reference.help_text("play")


def test_the_directive_renders_the_help_in_a_literal_block(tmp_path):
    """A page built by Sphinx holds the help as it is, in a literal block."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    from docutils import nodes
    from sphinx.application import Sphinx

    source = tmp_path / "source"
    source.mkdir()
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'docs' / '_ext')!r})\n"
        "extensions = ['myst_parser', 'cli_reference']\n")
    (source / "index.md").write_text("# CLI\n\n```{cli-reference} train\n```\n\n```{cli-reference} evaluate\n```\n")
    app = Sphinx(str(source), str(source), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
                 status=None, warning=None, warningiserror=True, freshenv=True)
    app.build()
    blocks = list(app.env.get_doctree("index").findall(nodes.literal_block))
    expected = [cli_reference.help_text(command).rstrip("\n") for command in ("train", "evaluate")]
    assert [block.astext() for block in blocks] == expected
    assert app.extensions["cli_reference"].parallel_read_safe
