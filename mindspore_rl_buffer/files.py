"""Files a user names (configs, checkpoints): checked to be regular files, with errors naming them;
and the files of a sharded buffer's ranks."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

# The checkpoint formats, by the ending of a file's name (MindSpore's format names).
FORMATS = {".safetensors": "safetensors", ".ckpt": "ckpt"}


def check_path(op: str, what: str, path: Any) -> Path:
    """``path`` (a ``str`` or an ``os.PathLike`` of one) as a ``Path``; a ``TypeError`` naming ``what`` otherwise.

    Examples:
        >>> from mindspore_rl_buffer.files import check_path
        >>> check_path('save', 'checkpoint', b'buffer.ckpt')
        Traceback (most recent call last):
        ...
        TypeError: For 'save', the checkpoint path must be a str or a pathlib.Path, but got bytes.
    """
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise TypeError(f"For '{op}', the {what} path must be a str or a pathlib.Path, but got {type(path).__name__}.")
    return Path(path)


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


def shard_path(path: str | os.PathLike, rank: int, world_size: int) -> str:
    """The file of rank ``rank``: ``<path>.rank<r>-of-<n>`` and ``path``'s ``.safetensors`` or ``.ckpt``
    ending (``.ckpt`` if it has neither).

    Examples:
        >>> from mindspore_rl_buffer.files import shard_path
        >>> shard_path('run/buffer.ckpt', 1, 2), shard_path('run/buffer.safetensors', 0, 2)
        ('run/buffer.rank1-of-2.ckpt', 'run/buffer.rank0-of-2.safetensors')
    """
    stem = os.fspath(path)
    suffix = next((end for end in FORMATS if stem.endswith(end)), None)
    if suffix is not None:
        stem = stem[: -len(suffix)]
    return f"{stem}.rank{rank}-of-{world_size}{suffix or '.ckpt'}"


def saved_world_sizes(path: str | os.PathLike) -> set[int]:
    """World sizes of the shard files saved under ``path``, by their names."""
    first = Path(shard_path(path, 0, 1))
    ending = ".rank0-of-1" + first.suffix
    pattern = re.compile(re.escape(first.name[: -len(ending)]) + r"\.rank\d+-of-(\d+)" + re.escape(first.suffix))
    if not first.parent.is_dir():
        return set()
    return {int(match.group(1)) for name in os.listdir(first.parent) if (match := pattern.fullmatch(name))}


def fsync_folder(folder: str | os.PathLike) -> None:
    """Make the renames done in ``folder`` durable (fsync of the folder itself)."""
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
