"""A sharded buffer's save and load, all or nothing on every rank.

With ``world_size > 1`` each rank first does its own part: :func:`save_shard` writes its
shard to a pending file beside its rank file, :func:`load_shard` reads and validates its rank
file in full without touching the shard. Then every rank sends one int32, a cause code (see
:data:`CAUSES`), to every other in one ``AllGather`` (:func:`agree`). Only if every code is 0
does a rank go on: the save renames its pending file over its rank file, the load copies the
validated tensors into the shard in place. Otherwise every rank raises at once, naming each
failing rank and its cause: the failing rank with its own error, the others from the cause's
code. No rank is left waiting in a later collective. With one rank nothing is exchanged.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mindspore as ms
from mindspore import nn

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import DIRECT_CALLS, refuse_destroyed
from mindspore_rl_buffer.checkpoint import load_checkpoint, restore_validated, save_checkpoint
from mindspore_rl_buffer.files import check_path, fsync_folder, saved_world_sizes, shard_path
from mindspore_rl_buffer.ops import sharded as sharded_ops

# Why a rank's part failed, as a code every rank can read: code -> (the error it raises, the
# cause in a load, the cause in a save).
MISSING, WORLD_SIZE, REFUSED, UNWRITABLE, DESTROYED, OTHER = range(1, 7)
CAUSES = {
    MISSING: (FileNotFoundError, "found no checkpoint file '{name}' on its host",
              "could not write its file '{name}' (a file or folder went missing)"),
    WORLD_SIZE: (ValueError, "found only files saved by a job of another world size", "-"),
    REFUSED: (ValueError, "refused its file '{name}' (corrupt, or saved from another buffer)",
              "cannot write its file '{name}' there (a folder, or under a file)"),
    UNWRITABLE: (OSError, "could not read its file '{name}'", "could not write its file '{name}'"),
    DESTROYED: (RuntimeError, "holds a destroyed buffer", "holds a destroyed buffer"),
    OTHER: (RuntimeError, "failed with an unexpected error", "failed with an unexpected error"),
}
_DONE = {"load": "no rank loaded its shard", "save": "no rank replaced its file"}


class _StatusGather(nn.Cell):
    """Every rank's status code, as an int32 tensor of shape ``(world_size,)``: one ``AllGather``."""

    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group

    def construct(self, code):
        return sharded_ops.all_gather(code, self.group)


_GATHERS: dict[str, _StatusGather] = {}


def agree(group: str, code: int) -> list[int]:
    """Every rank's ``code``, rank 0 first; a collective call (the Cell compiles on its first use)."""
    if group not in _GATHERS:
        _GATHERS[group] = _StatusGather(group)
    with DIRECT_CALLS:
        return [int(value) for value in _GATHERS[group](ms.Tensor([code], ms.int32)).asnumpy()]


def cause_of(error: BaseException) -> int:
    """The code of ``error`` (see :data:`CAUSES`)."""
    if getattr(error, "shard_cause", None) in CAUSES:
        return error.shard_cause
    if isinstance(error, FileNotFoundError):
        return MISSING
    if isinstance(error, ValueError):
        return REFUSED
    if isinstance(error, OSError):
        return UNWRITABLE
    if isinstance(error, RuntimeError) and "was destroyed" in str(error):
        return DESTROYED
    return OTHER


def _attempt(work: Callable[[], Any]) -> tuple[int, Exception | None, Any]:
    try:
        return 0, None, work()
    except Exception as error:  # every rank must reach the agreement, whatever went wrong here
        return cause_of(error), error, None


def _listed(items: list[str], separator: str = ", ", most: int = 4) -> str:
    """The first ``most`` items, and how many more there are."""
    more = f"{separator}and {len(items) - most} more" if len(items) > most else ""
    return separator.join(items[:most]) + more


def _refuse(op: str, path: str | os.PathLike, rank: int, codes: list[int], error: Exception | None) -> None:
    """Raise on every rank when any rank failed: its own error on a failing rank, one naming
    the failing ranks and their causes on the others."""
    failed = [r for r, code in enumerate(codes) if code]
    if not failed:
        return
    world_size, text = len(codes), 1 if op == "load" else 2
    ranks = f"rank{'s' if len(failed) > 1 else ''} {_listed([str(r) for r in failed])} of {world_size}"
    others = _listed([f"rank {r} " + CAUSES[codes[r]][text].format(name=Path(shard_path(path, r, world_size)).name)
                      for r in failed if r != rank], "; ")
    if error is not None:
        message = f"{error} The {op} failed on {ranks}, so {_DONE[op]}{f'; {others}' if others else ''}."
        try:  # the error's own type, if it takes a message alone
            raised = type(error)(message) if type(error).__module__ == "builtins" else None
        except TypeError:
            raised = None
        raise (raised or CAUSES[codes[rank]][0](message)) from error
    raise CAUSES[codes[failed[0]]][0](f"For '{op}', the {op} of '{os.fspath(path)}' failed on {ranks}, so "
                                      f"{_DONE[op]}: {others}. The failing rank's own error gives the details.")


def save_shard(buffer: Any, path: str | os.PathLike, group: str | None) -> str:
    """Write ``buffer``'s shard to its rank file (:meth:`ShardedReplayBuffer.save`); with several
    ranks, replace the rank files only when every rank wrote its pending file."""
    check_path("save", "checkpoint", path)
    file = shard_path(path, buffer.rank, buffer.world_size)
    if buffer.world_size == 1:
        save_checkpoint(buffer, file)
        return file
    final = Path(file)
    pending = final.with_name(f".{final.name[: -len(final.suffix)]}.pending{final.suffix}")

    def write() -> None:
        refuse_destroyed("save", buffer)
        if final.is_dir():  # else the rename fails later, under the pending file's name
            raise ValueError(f"For 'save', the checkpoint path '{final}' cannot be written: it is a folder, "
                             f"not a file.")
        save_checkpoint(buffer, pending)

    code, error, _ = _attempt(write)
    try:
        _refuse("save", path, buffer.rank, agree(group, code), error)
    except BaseException:
        pending.unlink(missing_ok=True)
        raise
    os.replace(pending, final)
    fsync_folder(final.parent)
    return file


def _rank_file(op: str, buffer: Any, path: str | os.PathLike) -> str:
    """This rank's file under ``path``, or the error of its absence. Anything at the path counts as
    present: the load refuses a folder, a FIFO or a symlink loop there, saying why, as for every buffer
    (:func:`~mindspore_rl_buffer.checkpoint.read_checkpoint`)."""
    file = shard_path(path, buffer.rank, buffer.world_size)
    if buffer.world_size == 1 and not os.path.lexists(file) and os.path.lexists(path):
        return os.fspath(path)  # one rank's whole buffer, as mindspore.save_checkpoint writes it
    if not os.path.lexists(file):
        saved = sorted(saved_world_sizes(path) - {buffer.world_size})
        if saved:
            error = _errors.world_size_error(op, os.fspath(path), saved[0], buffer.world_size)
            error.shard_cause = WORLD_SIZE
            raise error
        raise _errors.missing_shard_error(op, file)
    return file


def load_shard(buffer: Any, path: str | os.PathLike, group: str | None) -> None:
    """Restore ``buffer``'s shard from its rank file (:meth:`ShardedReplayBuffer.load`); with
    several ranks, only when every rank read and validated its own file.

    With several ranks the file is validated by the one checked restore path
    (:func:`~mindspore_rl_buffer.load_checkpoint` with ``restore=False``); the validated
    tensors are copied into ``buffer``, in place, once every rank agrees.
    """
    op = "load"
    check_path(op, "checkpoint", path)
    if buffer.world_size == 1:
        refuse_destroyed(op, buffer)
        load_checkpoint(_rank_file(op, buffer, path), buffer)
        return

    def read() -> dict[str, Any]:
        refuse_destroyed(op, buffer)
        file = _rank_file(op, buffer, path)
        return load_checkpoint(file, buffer, restore=False)

    code, error, loaded = _attempt(read)
    _refuse(op, path, buffer.rank, agree(group, code), error)
    restore_validated(buffer, loaded)
