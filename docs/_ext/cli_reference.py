"""A Sphinx directive that renders the ``mindspore-rl-buffer`` command's ``--help`` from its parser.

In a MyST page::

    ```{cli-reference} train
    ```

renders ``mindspore-rl-buffer train --help`` as a literal block, read from
:func:`mindspore_rl_buffer.apps.dqn.cli.build_parser` when the page is built, so the reference
cannot drift from the command. Without an argument it renders the top-level ``--help``.

The help is formatted at :data:`COLUMNS` columns (argparse reads the terminal width from the
``COLUMNS`` environment variable), so the page is the same on every machine;
``tests/test_cli_reference.py`` checks it against ``mindspore-rl-buffer <command> --help`` run
with the same ``COLUMNS``.

:func:`help_text` imports nothing of Sphinx, so the test runs without the ``docs`` extra.
"""
from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator

# The width the help is formatted at: argparse wraps at COLUMNS - 2 characters.
COLUMNS = 80


@contextlib.contextmanager
def _columns(columns: int) -> Iterator[None]:
    """Set the ``COLUMNS`` environment variable for the duration of the block."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def help_text(command: str | None = None, columns: int = COLUMNS) -> str:
    """What ``mindspore-rl-buffer [command] --help`` prints at ``columns`` columns.

    Args:
        command (str): ``'train'``, ``'evaluate'``, or ``None`` for the top-level help.
        columns (int): The terminal width argparse formats for.

    Returns:
        str, the help as the command prints it (ending in a newline).

    Raises:
        ValueError: If ``command`` is not a subcommand of the parser.
    """
    from mindspore_rl_buffer.apps.dqn.cli import build_parser

    argv = ["--help"] if command is None else [command, "--help"]
    out, err = io.StringIO(), io.StringIO()
    with _columns(columns), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(argv)
        except SystemExit as status:
            if status.code not in (0, None):
                raise ValueError(f"'mindspore-rl-buffer {' '.join(argv)}' failed: {err.getvalue().strip()}") from None
        else:
            raise ValueError(f"'mindspore-rl-buffer {' '.join(argv)}' printed no help")
    return out.getvalue()


def _directive():
    """The ``cli-reference`` directive class (built here so that :func:`help_text` needs no Sphinx)."""
    from docutils import nodes
    from sphinx.util.docutils import SphinxDirective

    class CliReference(SphinxDirective):
        """``cli-reference [command]``: the command's ``--help`` as a literal block."""

        optional_arguments = 1
        has_content = False

        def run(self) -> list:
            from mindspore_rl_buffer.apps.dqn import cli

            command = self.arguments[0] if self.arguments else None
            try:
                text = help_text(command)
            except ValueError as error:
                raise self.error(str(error)) from None
            self.env.note_dependency(cli.__file__)  # rebuild the page when the parser changes
            block = nodes.literal_block(text, text.rstrip("\n"))
            block["language"] = "text"
            self.set_source_info(block)
            return [block]

    return CliReference


def setup(app) -> dict:
    app.add_directive("cli-reference", _directive())
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
