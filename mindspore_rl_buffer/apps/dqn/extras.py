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


def require(module: str, purpose: str, alternative: str = "") -> ModuleType:
    """Import ``module``, or say which feature needs it and how to install it.

    Args:
        module (str): The module to import.
        purpose (str): What needs it, e.g. ``'the learning curve'``.
        alternative (str): How to do without it, appended to the message. Default: ``''``.

    Returns:
        The module.

    Raises:
        MissingExtraError: If ``module`` cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(f"For 'train', {purpose} needs {module}, which is not installed: "
                                f"{INSTALL}{alternative}.") from error


def require_tqdm() -> ModuleType:
    """tqdm, for the progress bar; raises :class:`MissingExtraError` if it is not installed."""
    return require("tqdm", "the progress bar", " (or run without it: --no-progress, progress=False)")


def require_matplotlib() -> ModuleType:
    """matplotlib, for the learning curve; raises :class:`MissingExtraError` if it is not installed."""
    return require("matplotlib", "the learning curve")


def check_extras(progress: bool, plot: bool) -> None:
    """Check that what a run will use is installed: tqdm for ``progress``, matplotlib for ``plot``.

    Raises:
        MissingExtraError: Naming the first one missing and ``pip install 'mindspore_rl_buffer[dqn]'``.
    """
    if progress:
        require_tqdm()
    if plot:
        require_matplotlib()
