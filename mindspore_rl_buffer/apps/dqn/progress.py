"""The training loop's progress bar: tqdm when it is shown, a silent stand-in when it is not."""
from __future__ import annotations

from typing import Any, Protocol

from mindspore_rl_buffer.apps.dqn.extras import require_tqdm


class ProgressBar(Protocol):
    """What the training loop uses of a tqdm bar."""

    n: int

    def update(self, n: int) -> Any: ...

    def set_postfix(self, ordered_dict: dict[str, str], refresh: bool = True) -> Any: ...

    def close(self) -> Any: ...


class SilentBar:
    """Counts like a tqdm bar and shows nothing; needs no tqdm."""

    def __init__(self) -> None:
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix(self, ordered_dict: dict[str, str], refresh: bool = True) -> None:
        del ordered_dict, refresh

    def close(self) -> None:
        pass


def progress_bar(total: int, shown: bool) -> ProgressBar:
    """A tqdm bar over ``total`` environment steps, or a :class:`SilentBar` if not ``shown``.

    Raises:
        MissingExtraError: If ``shown`` and tqdm is not installed.
    """
    if not shown:
        return SilentBar()
    return require_tqdm().tqdm(total=total, unit="step", dynamic_ncols=True)
