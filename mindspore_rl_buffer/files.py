"""Files a user names (configs, checkpoints): checked to be regular files, with errors naming them."""
from __future__ import annotations

import stat
from pathlib import Path


def check_regular_file(op: str, what: str, path: Path, max_bytes: int | None = None) -> None:
    """Refuse ``path`` unless it is a regular file (of at most ``max_bytes`` bytes), naming it and why.

    Raises:
        FileNotFoundError: If nothing is at ``path`` (a dangling symlink included).
        ValueError: If ``path`` is a folder, a device, a FIFO or a socket, cannot be examined
            (a symlink loop, a name too long, a file where a folder is expected), or is larger
            than ``max_bytes``.

    Examples:
        >>> from pathlib import Path
        >>> from mindspore_rl_buffer.files import check_regular_file
        >>> check_regular_file('load', 'checkpoint', Path('/'))
        Traceback (most recent call last):
        ...
        ValueError: For 'load', the checkpoint file '/' is a folder, not a file.
    """
    try:
        status = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"For '{op}', no {what} file at '{path}'.") from None
    except OSError as error:
        raise ValueError(f"For '{op}', the {what} file '{path}' cannot be examined: {error.strerror}.") from None
    if stat.S_ISDIR(status.st_mode):
        raise ValueError(f"For '{op}', the {what} file '{path}' is a folder, not a file.")
    if not stat.S_ISREG(status.st_mode):
        raise ValueError(f"For '{op}', the {what} file '{path}' must be a regular file, but it is a device, a FIFO "
                         f"or a socket.")
    if max_bytes is not None and status.st_size > max_bytes:
        raise ValueError(f"For '{op}', the {what} file '{path}' must hold at most {max_bytes:,} bytes, but it holds "
                         f"{status.st_size:,}.")
