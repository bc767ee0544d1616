"""The DQN app's optional dependencies, the ``dqn`` extra, and the error when one is missing.

matplotlib draws the learning curve and tqdm the progress bar; neither is a dependency of
the library. :func:`check_extras` runs before any training, so a missing one costs nothing.
"""
from __future__ import annotations

import importlib
from types import ModuleType

INSTALL = "pip install 'mindspore_rl_buffer[dqn]'"


class MissingExtraError(ImportError):
    """An optional dependency of the DQN app is not installed; the message says how to install it."""


def require(module: str, purpose: str, alternative: str = "", command: str = "train") -> ModuleType:
    """Import ``module``, or say which command and feature need it and how to install it.

    Args:
        module (str): The module to import.
        purpose (str): What needs it, e.g. ``'the learning curve'``.
        alternative (str): How to do without it, appended to the message. Default: ``''``.
        command (str): The command that needs it, ``'train'`` or ``'evaluate'``. Default: ``'train'``.

    Returns:
        The module.

    Raises:
        MissingExtraError: If ``module`` cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(f"For '{command}', {purpose} needs {module}, which is not installed: "
                                f"{INSTALL}{alternative}.") from error


def require_tqdm() -> ModuleType:
    """tqdm, for the progress bar; raises :class:`MissingExtraError` if it is not installed."""
    return require("tqdm", "the progress bar", " (or run without it: --no-progress, progress=False)")


def require_matplotlib(purpose: str = "the learning curve", command: str = "train") -> ModuleType:
    """matplotlib, for ``command``'s ``purpose`` (the learning curve of ``train`` by default); raises
    :class:`MissingExtraError` naming them if it is not installed."""
    return require("matplotlib", purpose, command=command)


def check_extras(progress: bool, plot: bool) -> None:
    """Check that what a run will use is installed: tqdm for ``progress``, matplotlib for ``plot``.

    Raises:
        MissingExtraError: Naming the first one missing and ``pip install 'mindspore_rl_buffer[dqn]'``.
    """
    if progress:
        require_tqdm()
    if plot:
        require_matplotlib()
